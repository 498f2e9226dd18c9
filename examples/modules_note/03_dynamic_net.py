"""ModuleList and ModuleDict, recursive named_parameters, to(), and apply() for initialization."""

import onnxnn as torch
from onnxnn import nn
from common import MyLinear


class DynamicNet(nn.Module):
    def __init__(self, num_layers):
        super().__init__()
        self.linears = nn.ModuleList([MyLinear(4, 4) for _ in range(num_layers)])
        self.activations = nn.ModuleDict({"relu": nn.ReLU(), "lrelu": nn.LeakyReLU()})
        self.final = MyLinear(4, 1)

    def forward(self, x, act):
        for linear in self.linears:
            x = linear(x)
            x = self.activations[act](x)
        x = self.final(x)
        return x


dynamic_net = DynamicNet(3)
sample_input = torch.randn(4)
output = dynamic_net(sample_input, "relu")

for parameter in dynamic_net.named_parameters():
    print(parameter)

# Move all parameters to a CUDA device (only where onnxruntime's CUDA provider works here).
device = "cuda" if torch.cuda.is_available() else "cpu"
dynamic_net.to(device=device)

# Change precision of all parameters
dynamic_net.to(dtype=torch.float64)

print(dynamic_net(torch.randn(5, device=device, dtype=torch.float64)[:4], "relu"))


# Define a function to initialize Linear weights.
# Note that no_grad() is used here to avoid tracking this computation in the autograd graph.
@torch.no_grad()
def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_normal_(m.weight)
        m.bias.fill_(0.0)


# Apply the function recursively on the module and its submodules.
dynamic_net.apply(init_weights)
