"""Modules as Building Blocks: Sequential, children, and named_modules of a nested network."""

import onnxnn as torch
from onnxnn import nn
from common import MyLinear, Net

net = nn.Sequential(MyLinear(4, 3), nn.ReLU(), MyLinear(3, 1))

sample_input = torch.randn(4)
print(net(sample_input))

net = Net()
for child in net.named_children():
    print(child)


class BigNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = MyLinear(5, 4)
        self.net = Net()

    def forward(self, x):
        return self.net(self.l1(x))


big_net = BigNet()
for module in big_net.named_modules():
    print(module)
