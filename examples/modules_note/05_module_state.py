"""Module State: saving and loading state_dicts, buffers (persistent and not), StatefulModule."""

import onnxnn as torch
from onnxnn import nn
from common import Net

net = Net()

# Save the module
torch.save(net.state_dict(), "net.pt")

# Load the module later on
new_net = Net()
print(new_net.load_state_dict(torch.load("net.pt")))


class RunningMean(nn.Module):
    def __init__(self, num_features, momentum=0.9):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(num_features))

    def forward(self, x):
        self.mean = self.momentum * self.mean + (1.0 - self.momentum) * x
        return self.mean


m = RunningMean(4)
for _ in range(10):
    input = torch.randn(4)
    m(input)

print(m.state_dict())

# Serialized form will contain the 'mean' tensor
torch.save(m.state_dict(), "mean.pt")

m_loaded = RunningMean(4)
m_loaded.load_state_dict(torch.load("mean.pt"))
assert torch.all(m.mean == m_loaded.mean)

# Moves all module parameters and buffers to the specified device / dtype
m.to(device="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.float64)

for buffer in m.named_buffers():
    print(buffer)


class StatefulModule(nn.Module):
    def __init__(self):
        super().__init__()
        # Setting a nn.Parameter as an attribute of the module automatically registers the tensor
        # as a parameter of the module.
        self.param1 = nn.Parameter(torch.randn(2))

        # Alternative string-based way to register a parameter.
        self.register_parameter("param2", nn.Parameter(torch.randn(3)))

        # Reserves the "param3" attribute as a parameter, preventing it from being set to anything
        # except a parameter. "None" entries like this will not be present in the module's state_dict.
        self.register_parameter("param3", None)

        # Registers a list of parameters.
        self.param_list = nn.ParameterList([nn.Parameter(torch.randn(2)) for i in range(3)])

        # Registers a dictionary of parameters.
        self.param_dict = nn.ParameterDict({"foo": nn.Parameter(torch.randn(3)), "bar": nn.Parameter(torch.randn(4))})

        # Registers a persistent buffer (one that appears in the module's state_dict).
        self.register_buffer("buffer1", torch.randn(4), persistent=True)

        # Registers a non-persistent buffer (one that does not appear in the module's state_dict).
        self.register_buffer("buffer2", torch.randn(5), persistent=False)

        # Reserves the "buffer3" attribute as a buffer, preventing it from being set to anything
        # except a buffer. "None" entries like this will not be present in the module's state_dict.
        self.register_buffer("buffer3", None)

        # Adding a submodule registers its parameters as parameters of the module.
        self.linear = nn.Linear(2, 3)


m = StatefulModule()

# Save and load state_dict.
torch.save(m.state_dict(), "state.pt")
m_loaded = StatefulModule()
m_loaded.load_state_dict(torch.load("state.pt"))

# Note that non-persistent buffer "buffer2" and reserved attributes "param3" and "buffer3" do
# not appear in the state_dict.
print(m_loaded.state_dict())
