"""A Simple Custom Module: MyLinear, calling it, and its named parameters."""

import onnxnn as torch
from common import MyLinear

m = MyLinear(4, 3)
sample_input = torch.randn(4)
print(m(sample_input))

for parameter in m.named_parameters():
    print(parameter)
