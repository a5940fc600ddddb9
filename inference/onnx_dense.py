"""The dense VQ-OPT forward pass run by ONNX Runtime: an optional backend for full builds.

A full build (opening a document, rebuilding a window) and `verify()` run one dense pass over a
window and keep every layer's x, q, k, v, s and codes. `OnnxDenseForward` is that pass exported
to ONNX once per model and run by onnxruntime; called with (ids, positions) it returns the same
`ForwardOutput` (traces included) as `VQOPT.forward(..., collect=True)`, so the engine can take
its traces from either. `benchmarks/onnx_dense.py` measures it against torch on the same inputs.

Limits, measured rather than assumed: float32 only (ONNX Runtime's CPU provider has no float64
kernel for Erf, which the exact GELU of the attention needs); the export uses torch's TorchScript
exporter, which needs the `onnx` package but not `onnxscript`, and runs offline. The CUDA provider
is used when the model sits on a GPU and onnxruntime-gpu offers it; otherwise the CPU provider.

Optional: `pip install "vq-lsp[onnx]"` (onnxruntime and onnx; onnxruntime-gpu for CUDA).
"""

from __future__ import annotations

import io
import warnings

import torch
import torch.nn as nn

from .model import VQOPT, ForwardOutput, LayerTrace

INSTALL_HINT = (
    'pip install "vq-lsp[onnx]" (onnxruntime and onnx, CPU); for CUDA install onnxruntime-gpu in place of onnxruntime'
)
OPSET = 17
SUPPORTED_DTYPES = (torch.float32,)
TRACE_FIELDS = ("x", "q", "k", "v", "s")


class OnnxRuntimeMissing(ImportError):
    """onnxruntime or onnx is not installed: the message says which extra to install."""


def require_onnxruntime():
    """Import onnxruntime (and check for onnx, which the exporter needs), or say how to install them."""
    try:
        import onnx  # noqa: F401  (torch's exporter serialises through it)
        import onnxruntime
    except ImportError as e:
        raise OnnxRuntimeMissing(
            f"the ONNX Runtime backend needs the {e.name or 'onnxruntime'} package: {INSTALL_HINT}"
        ) from None
    return onnxruntime


class _Flat(nn.Module):
    """VQOPT's dense pass with its traces as a flat tuple of tensors: what an ONNX graph can return."""

    def __init__(self, net: VQOPT) -> None:
        super().__init__()
        self.net = net

    def forward(self, ids: torch.Tensor, positions: torch.Tensor):
        out = self.net(ids.unsqueeze(0), positions.unsqueeze(0), collect=True)
        stacked = [torch.stack([getattr(t, name)[0] for t in out.traces]) for name in TRACE_FIELDS]
        if self.net.config.vq:
            stacked.append(torch.stack([t.codes[0] for t in out.traces]))
        return (*stacked, out.layer_outputs[-1][0], out.hidden[0], out.cls_logits[0])


def export(net: VQOPT) -> bytes:
    """The model's dense pass as an ONNX graph (bytes), for any sequence length up to the window."""
    require_onnxruntime()
    example = torch.arange(2, device=next(net.parameters()).device)
    names = [*TRACE_FIELDS, *(("codes",) if net.config.vq else ()), "last", "hidden", "cls_logits"]
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracing notes
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Flat(net).eval(),
            (example, example * 100),
            buf,
            dynamo=False,
            opset_version=OPSET,
            input_names=["ids", "positions"],
            output_names=names,
            dynamic_axes={"ids": {0: "tokens"}, "positions": {0: "tokens"}},
        )
    return buf.getvalue()


def providers_for(device: torch.device, available: list[str]) -> list[str]:
    """CUDA execution provider for a model on a GPU when onnxruntime offers it, else the CPU one."""
    if device.type == "cuda" and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def make_session(net: VQOPT, threads: int | None = None):
    """An ONNX Runtime session running the exported dense pass, on the provider `providers_for` picks.

    No dtype check here: the benchmark uses it to show what ONNX Runtime itself says to float64."""
    ort = require_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: no provider chatter on stderr
    # idle pool threads sleep instead of spinning: they would take the cores the torch engine works on
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = providers_for(next(net.parameters()).device, ort.get_available_providers())
    return ort.InferenceSession(export(net), options, providers=providers)


class OnnxDenseForward:
    """(ids, positions) of one window -> ForwardOutput with traces, computed by ONNX Runtime.

    The hook a full build needs: `engine.dense.dense_pass(state, ids, pos)` returns exactly this."""

    def __init__(self, net: VQOPT, threads: int | None = None) -> None:
        require_onnxruntime()
        p = next(net.parameters())
        if p.dtype not in SUPPORTED_DTYPES:
            raise ValueError(
                f"the ONNX Runtime backend runs float32 models only, this one is {p.dtype} "
                f"(ONNX Runtime's CPU provider has no float64 Erf kernel for the exact GELU)"
            )
        self.device, self.vq, self.layers = p.device, net.config.vq, net.config.num_hidden_layers
        self.session = make_session(net, threads)
        self.providers = self.session.get_providers()

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor) -> ForwardOutput:
        feeds = {"ids": ids.detach().cpu().long().numpy(), "positions": positions.detach().cpu().long().numpy()}
        outs = [torch.from_numpy(a).to(self.device) for a in self.session.run(None, feeds)]
        x, q, k, v, s = (t.unsqueeze(1) for t in outs[:5])  # (L, 1, T, d): batch of one, as the torch pass
        codes = outs[5].unsqueeze(1) if self.vq else None
        last, hidden, cls_logits = (t.unsqueeze(0) for t in outs[-3:])
        traces = [
            LayerTrace(x=x[i], q=q[i], k=k[i], v=v[i], s=s[i], codes=None if codes is None else codes[i])
            for i in range(self.layers)
        ]
        layer_outputs = [x[i] for i in range(1, self.layers)] + [last]
        return ForwardOutput(
            hidden=hidden,
            cls_logits=cls_logits,
            layer_outputs=layer_outputs,
            pre_vq=[t.s for t in traces],
            codes=[t.codes for t in traces],
            traces=traces,
        )


DENSE_BACKENDS = ("torch", "onnx", "auto")
# "auto" runs windows of at least this many rows on ONNX Runtime, shorter ones on torch: measured
# (benchmarks/results/onnx_dense.md) ORT is faster for 2,000-token documents (two windows of about
# 1,000 rows) at 1 and 2 threads, but at 500 rows only on 1 thread (0.86x on 2).
AUTO_MIN_ROWS = 1000


class SizedDense:
    """ONNX Runtime for windows of at least `min_rows` rows, torch's own pass below that."""

    def __init__(self, net: VQOPT, onnx: OnnxDenseForward, min_rows: int) -> None:
        self.net, self.onnx, self.min_rows = net, onnx, min_rows

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor) -> ForwardOutput:
        if len(ids) >= self.min_rows:
            return self.onnx(ids, positions)
        return self.net(ids.unsqueeze(0), positions.unsqueeze(0), collect=True)


def select_dense(net: VQOPT, backend: str = "auto", threads: int | None = None):
    """The dense pass a full build should run, (ids, positions) -> ForwardOutput; None: torch's own.

    "torch": torch always. "onnx": ONNX Runtime for every window, or an error saying why not (extra
    missing, not float32). "auto": where benchmarks/onnx_dense.py measured ONNX Runtime faster with
    equal codes: a float32 model with onnxruntime installed, windows of AUTO_MIN_ROWS rows or more;
    torch otherwise (float64, the verification mode, always)."""
    if backend not in DENSE_BACKENDS:
        raise ValueError(f"dense backend must be one of {', '.join(DENSE_BACKENDS)}, got {backend!r}")
    if backend == "torch":
        return None
    if backend == "onnx":
        return OnnxDenseForward(net, threads)
    if next(net.parameters()).dtype not in SUPPORTED_DTYPES:
        return None
    try:
        require_onnxruntime()
    except OnnxRuntimeMissing:
        return None
    return SizedDense(net, OnnxDenseForward(net, threads), AUTO_MIN_ROWS)
