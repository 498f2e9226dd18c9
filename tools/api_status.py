"""Writes docs/api_status.md: torch.Tensor's public methods, torch's public functions and the public
names of torch's classes, torch.nn, nn.functional, nn.init, nn.utils, optim, lr_scheduler and
autograd, each with onnxnn's status (done / n/a and why / missing), and the names onnxnn has beyond them.

Run after adding or removing an API name (needs torch installed; onnxnn never imports it)::

    PYTHONPATH=. python tools/api_status.py          # rewrites docs/api_status.md
    PYTHONPATH=. python tools/api_status.py --check  # exits 1 if the file is stale

``tests/runtime/test_api_parity.py`` keeps the table true without torch (every "done" exists,
nothing else does, every onnxnn name is listed) and, with torch, checks it lists every torch name.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "docs" / "api_status.md"

# (pattern on the name, why onnxnn does not provide it). First match wins; a name onnxnn has is
# "done" whatever its pattern says.
NOT_APPLICABLE = [
    (
        r"sparse|coalesce|^(crow|ccol|col|row)_indices(_copy)?$|^indices(_copy)?$|^values(_copy)?$|to_dense|^smm$|sspaddmm|_cs[rc]|_bs[rc]|"
        r"_coo|dense_dim|to_sparse|^(dsmm|hsmm|hspmm|saddmm|spmm)$|^native_norm$",
        "sparse layouts: onnxnn tensors are dense (native_norm is sparse-only in PyTorch)",
    ),
    (
        r"^q_|quantiz|int_repr|qscheme|qparams|fake_quant|per_channel|per_tensor|fbgemm|^quantized",
        "quantized tensors: export QuantizeLinear/DequantizeLinear graphs instead",
    ),
    (
        r"complex|conj|^real$|^imag$|angle|polar|view_as_real|view_as_complex|^chalf$|^cfloat$|^cdouble$|"
        r"resolve_neg|is_neg$",
        "complex dtypes: onnxnn has none",
    ),
    (
        r"storage|data_ptr|^stride$|^set_$|resize|record_stream|^dim_order$|as_strided|is_set_to|^is_pinned$|"
        r"^nbytes$|^module_load$|^apply_$|^map2?_$|^from_file$|frombuffer|^new$|^new_empty_strided$|^empty_strided$|"
        r"^is_storage$|^storage_offset$",
        "memory layout and aliasing: values are immutable ONNX values (in place means rebinding)",
    ),
    (
        r"^(is_)?(xpu|ipu|mps|mtia|maia|vulkan|xla|meta|hpu)$|mkldnn|cudnn|miopen|xnnpack|^is_distributed$|"
        r"get_device_module|^cuda$|^is_vulkan_available$",
        "other device backends: onnxnn runs on onnxruntime's CPU/CUDA providers",
    ),
    (r"names|^rename_?$|^align_(to|as)$", "named tensors"),
    (r"nested|to_padded_tensor", "nested tensors"),
    (
        r"^sym_|^(compile|compiled_with_cxx11_abi|vmap|cond|while_loop|export|jit|library|fx|_dynamo|"
        r"set_warn_always|is_warn_always_enabled|"
        r"set_default_tensor_type|"
        r"get_autocast.*|set_autocast.*|is_autocast.*|clear_autocast_cache|autocast_.*|"
        r"import_ir_module.*|get_file_path|prepare_multiprocessing_environment|"
        r"unify_type_list|fork|wait|merge_type_from_type_comment|parse_.*|"
        r"vitals_enabled|set_vital|read_vitals|init_num_threads|"
        r"get_rng_state|set_rng_state|"
        r"register_.*|classproperty|lobpcg|pca_lowrank|svd_lowrank|save|load|manual_seed|seed|initial_seed)$",
        "PyTorch runtime machinery (compilers, threads, global switches) with no onnxnn counterpart",
    ),
    (r"^profiler_|^thread_safe_generator$", "PyTorch runtime machinery (profiler, per-thread generators)"),
    (
        r"^batch_norm_(stats|elemt|update_stats|gather_stats|gather_stats_with_counts|backward_elemt|backward_reduce)$",
        "SyncBatchNorm's kernel internals (statistics and backward pieces); onnxnn's batch_norm is one op",
    ),
    (
        r"^(from_dlpack|to_dlpack)$",
        "DLPack shares one buffer between libraries; onnxnn values are immutable "
        "ONNX values (copy instead: onnxnn.from_numpy(numpy.from_dlpack(x)))",
    ),
    (r"^grad_dtype$", "gradients always have their tensor's dtype: the backward graph is typed by the forward one"),
    (r"^index$", "functorch first-class dimensions (binding positions to Dim objects)"),
    (r"^layout$", "memory layout: onnxnn values have no layout (PyTorch's strided/sparse distinction)"),
    (r"^name$", "named tensors"),
    (r"^(reinforce|volatile)$", "removed from PyTorch (reinforce raises, volatile is always False)"),
    (r"^slice_inverse$", "functionalization internals: onnxnn writes a view back with a scatter (runtime/views.py)"),
    (
        r"^(solve|lstsq|eig|symeig|matrix_rank)$",
        "removed from PyTorch (since 1.9 the name only raises, pointing to torch.linalg): onnxnn.linalg has solve and "
        "lstsq, eigh and matrix_rank; eig's complex results have no dtype in onnxnn",
    ),
]


# The namespaces beyond torch's functions and Tensor methods: (section title, torch's module,
# onnxnn's module, which public names count: "classes", "functions" or "callables"). Names a
# namespace only re-exports from outside torch (typing's, say) are not counted.
NAMESPACES = [
    ("torch classes", "torch", "onnxnn", "classes"),
    ("torch.nn", "torch.nn", "onnxnn.nn", "classes"),
    ("torch.nn.functional", "torch.nn.functional", "onnxnn.nn.functional", "functions"),
    ("torch.nn.init", "torch.nn.init", "onnxnn.nn.init", "functions"),
    ("torch.nn.utils", "torch.nn.utils", "onnxnn.nn.utils", "functions"),
    ("torch.optim", "torch.optim", "onnxnn.optim", "classes"),
    ("torch.optim.lr_scheduler", "torch.optim.lr_scheduler", "onnxnn.optim.lr_scheduler", "classes"),
    ("torch.autograd", "torch.autograd", "onnxnn.autograd", "callables"),
]

# Class names of those namespaces (first match wins, after NOT_APPLICABLE's lowercase patterns).
NOT_APPLICABLE_CLASSES = [
    (
        r"Type$|^Script|^(AliasDb|Argument|ArgumentSpec|Block|CallStack|Capsule|Code|CompilationUnit|"
        r"CompleteArgumentSpec|ConcreteModuleType|ConcreteModuleTypeBuilder|DeepCopyMemoTable|ErrorReport|"
        r"ExecutionPlan|FileCheck|FunctionSchema|Gradient|Graph|GraphExecutorState|IODescriptor|InferredType|"
        r"JITException|LiteScriptModule|Node|OperatorInfo|StaticModule|TracingState|Use|Value|BufferDict|"
        r"ModuleDict|ParameterDict|AggregationType|LoggerBase|LockingLogger|NoopLogger|Tag|"
        r"PyTorchFileReader|PyTorchFileWriter|SerializationStorageContext|DeserializationStorageContext|"
        r"Sym(Bool|Float|Int)|DispatchKey|DispatchKeySet|ExcludeDispatchKeyGuard|DisableTorchFunction|"
        r"DisableTorchFunctionSubclass|BenchmarkConfig|BenchmarkExecutionStats|ThroughputBenchmark|Future)$",
        "TorchScript, dispatcher and compiler machinery (graph IR types, symbolic sizes, loggers, benchmarks)",
    ),
    (r"Storage(Base)?$", "memory layout and aliasing: values are immutable ONNX values (in place means rebinding)"),
    (r"^(Event|Stream|AcceleratorError|OutOfMemoryError|FatalError)$", "CUDA streams, events and runtime errors"),
    (r"^(layout|qscheme)$", "memory layouts and quantization schemes: onnxnn values have neither"),
    (r"^(SyncBatchNorm)$", "onnxnn.distributed.SyncBatchNorm (onnxnn.nn sits below onnxnn.distributed)"),
    (r"^(Container|LinearCrossEntropyOptions)$", "PyTorch internals (a removed base class, a fused loss's options)"),
    (r"^SparseAdam$", "sparse layouts: onnxnn tensors are dense"),
    (
        r"^(NestedIOFunction|SavedTensor|DeviceType|Profiler(Activity|Config|Event|State))$",
        "autograd engine and profiler internals",
    ),
    (
        r"^(assert_int_or_pair|boolean_dispatch|handle_torch_function|has_torch_function.*|is_tensor_like|"
        r"enforce_grad_layout_policy|kineto_available|(is|set)_multithreading_enabled|is_view_replay_enabled)$",
        "PyTorch internals (__torch_function__ dispatch, argument helpers, engine switches)",
    ),
    (r"^(scaled_mm|scaled_grouped_mm|grouped_mm)$", "float8 and grouped GEMM kernels of CUDA's"),
    (r"^convert_conv[23]d_weight_memory_format$", "memory layout: onnxnn values have no memory format"),
]


def namespace_names(module, kind: str) -> list[str]:
    """The public names of ``module`` that count for ``kind`` (see ``NAMESPACES``); for onnxnn's
    modules, those defined in onnxnn."""
    home = module.__name__.split(".")[0]
    names = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType) or not (getattr(obj, "__module__", None) or "").startswith(home):
            continue
        is_class = isinstance(obj, type)
        if {"classes": is_class, "functions": callable(obj) and not is_class, "callables": callable(obj)}[kind]:
            names.append(name)
    return sorted(names)


def _torch_tensor_names(torch) -> list[str]:
    return sorted(name for name in dir(torch.Tensor) if not name.startswith("_"))


def _torch_function_names(torch) -> list[str]:
    names = []
    for name in dir(torch):
        if name.startswith("_"):
            continue
        obj = getattr(torch, name)
        if callable(obj) and not isinstance(obj, type) and not isinstance(obj, types.ModuleType):
            names.append(name)
    return sorted(names)


def onnxnn_tensor_names(onnxnn) -> list[str]:
    """The public attributes of onnxnn.Tensor (methods and properties)."""
    return sorted(name for name in dir(onnxnn.Tensor) if not name.startswith("_"))


def onnxnn_function_names(onnxnn) -> list[str]:
    """The public functions of the onnxnn package (not classes, modules or dtypes)."""
    names = []
    for name in dir(onnxnn):
        if name.startswith("_"):
            continue
        obj = getattr(onnxnn, name)
        if (inspect.isfunction(obj) or inspect.isbuiltin(obj)) and not isinstance(obj, type):
            names.append(name)
    return sorted(names)


def _status(name: str, present: bool, patterns: list = NOT_APPLICABLE) -> tuple[str, str]:
    if present:
        return "done", ""
    for pattern, reason in patterns:
        if re.search(pattern, name):
            return "n/a", reason
    return "missing", ""


def _section(title: str, names: list[str], have: set[str], patterns: list = NOT_APPLICABLE) -> tuple[list[str], dict]:
    rows = [f"## {title}", "", "| name | status | note |", "|---|---|---|"]
    counts = {"done": 0, "n/a": 0, "missing": 0}
    for name in names:
        status, note = _status(name, name in have, patterns)
        counts[status] += 1
        rows.append(f"| `{name}` | {status} | {note} |")
    return rows, counts


def render(torch, onnxnn) -> str:
    tensor_names, function_names = _torch_tensor_names(torch), _torch_function_names(torch)
    have_tensor, have_functions = set(onnxnn_tensor_names(onnxnn)), set(onnxnn_function_names(onnxnn))
    tensor_rows, tensor_counts = _section("torch.Tensor methods", tensor_names, have_tensor)
    function_rows, function_counts = _section("torch functions", function_names, have_functions)
    extra_tensor = sorted(have_tensor - set(tensor_names))
    extra_functions = sorted(have_functions - set(function_names))
    namespace_rows, summaries, extras = [], [], []
    for title, torch_path, onnxnn_path, kind in NAMESPACES:
        torch_module, onnxnn_module = importlib.import_module(torch_path), importlib.import_module(onnxnn_path)
        names = namespace_names(torch_module, kind)
        have = set(namespace_names(onnxnn_module, kind))
        rows, counts = _section(title, names, have, NOT_APPLICABLE_CLASSES + NOT_APPLICABLE)
        namespace_rows += [*rows, ""]
        summaries.append(
            f"- {title}: {counts['done']}/{len(names)} done, {counts['n/a']} n/a, {counts['missing']} missing"
        )
        extras += [f"| `{name}` | {title} |" for name in sorted(have - set(names))]
    lines = [
        "# API status: onnxnn against PyTorch",
        "",
        f"Generated by `tools/api_status.py` from torch {torch.__version__}; `tests/runtime/test_api_parity.py` "
        "checks it against the code. *done*: onnxnn has it with PyTorch's semantics; *n/a*: deliberately not "
        "provided (the note says why); *missing*: not yet written.",
        "",
        f"- torch.Tensor methods: {tensor_counts['done']}/{len(tensor_names)} done, {tensor_counts['n/a']} n/a, "
        f"{tensor_counts['missing']} missing",
        f"- torch functions: {function_counts['done']}/{len(function_names)} done, {function_counts['n/a']} n/a, "
        f"{function_counts['missing']} missing",
        *summaries,
        "",
        *tensor_rows,
        "",
        *function_rows,
        "",
        *namespace_rows,
        "## onnxnn only",
        "",
        "Names onnxnn has that the torch version above does not (aliases, onnxnn's own switches).",
        "",
        "| name | kind |",
        "|---|---|",
        *[f"| `{name}` | Tensor |" for name in extra_tensor],
        *[f"| `{name}` | function |" for name in extra_functions],
        *extras,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import torch

    import onnxnn

    text = render(torch, onnxnn)
    if "--check" in argv:
        current = TABLE.read_text() if TABLE.exists() else ""
        if current != text:
            print(f"{TABLE} is stale: run tools/api_status.py")
            return 1
        return 0
    TABLE.parent.mkdir(exist_ok=True)
    TABLE.write_text(text)
    print("\n".join(line for line in text.splitlines() if line.startswith("- torch")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
