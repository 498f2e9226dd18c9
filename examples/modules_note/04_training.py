"""Neural Network Training with Modules: teach Net to output zero, then eval mode."""

import onnxnn as torch
from onnxnn import nn
from common import Net

# A seed for which every hidden unit of Net stays active: with an unlucky initialization a ReLU
# unit is dead for all inputs and its outgoing weight only decays (in PyTorch too).
torch.manual_seed(1)

# Create the network (from previous section) and optimizer
net = Net()
optimizer = torch.optim.SGD(net.parameters(), lr=1e-4, weight_decay=1e-2, momentum=0.9)

# Run a sample training loop that "teaches" the network
# to output the constant zero function
for _ in range(10000):
    input = torch.randn(4)
    output = net(input)
    loss = torch.abs(output)
    net.zero_grad()
    loss.backward()
    optimizer.step()

# After training, switch the module to eval mode to do inference, compute performance metrics, etc.
net.eval()

print(net.l1.weight)


class ModalModule(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if self.training:
            # Add a constant only in training mode.
            return x + 1.0
        else:
            return x


m = ModalModule()
x = torch.randn(4)

print("training mode output: {}".format(m(x)))

m.eval()
print("evaluation mode output: {}".format(m(x)))
