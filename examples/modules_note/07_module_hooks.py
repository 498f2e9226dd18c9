"""Module Hooks: forward pre-hooks, forward hooks and a full backward hook."""

import onnxnn as torch
from onnxnn import nn

torch.manual_seed(1)


def forward_pre_hook(m, inputs):
    # Allows for examination and modification of the input before the forward pass.
    # Note that inputs are always wrapped in a tuple.
    input = inputs[0]
    return input + 1.0


def forward_hook(m, inputs, output):
    # Allows for examination of inputs / outputs and modification of the outputs
    # after the forward pass. Note that inputs are always wrapped in a tuple while outputs
    # are passed as-is.

    # Residual computation a la ResNet.
    return output + inputs[0]


def backward_hook(m, grad_inputs, grad_outputs):
    # Allows for examination of grad_inputs / grad_outputs and modification of
    # grad_inputs used in the rest of the backwards pass. Note that grad_inputs and
    # grad_outputs are always wrapped in tuples.
    new_grad_inputs = [torch.ones_like(gi) * 42.0 for gi in grad_inputs]
    return new_grad_inputs


# Create sample module & input.
m = nn.Linear(3, 3)
x = torch.randn(2, 3, requires_grad=True)

# ==== Demonstrate forward hooks. ====
# Run input through module before and after adding hooks.
print("output with no forward hooks: {}".format(m(x)))

# Note that the modified input results in a different output.
forward_pre_hook_handle = m.register_forward_pre_hook(forward_pre_hook)
print("output with forward pre hook: {}".format(m(x)))

# Note the modified output.
forward_hook_handle = m.register_forward_hook(forward_hook)
print("output with both forward hooks: {}".format(m(x)))

# Remove hooks; note that the output here matches the output before adding hooks.
forward_pre_hook_handle.remove()
forward_hook_handle.remove()
print("output after removing forward hooks: {}".format(m(x)))

# ==== Demonstrate backward hooks. ====
m(x).sum().backward()
print("x.grad with no backwards hook: {}".format(x.grad))

# Clear gradients before running backward pass again.
m.zero_grad()
x.grad.zero_()

m.register_full_backward_hook(backward_hook)
m(x).sum().backward()
print("x.grad with backwards hook: {}".format(x.grad))
