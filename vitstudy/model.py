"""vitstudy.Model: a timm VisionTransformer run by one of the study's encoder steps on CUDA
tensors. The compiled half (_engine) is an encoder session (stages/encoder/session.hpp): the
weights once on the GPU, a position embedding per image size, the forwards it has made kept
within a memory budget. This file checks what the caller passes, converts it, resamples the
position embedding for a new image size as timm does, and calibrates FP8 scales per image size.
"""
from . import timm_weights

# The fastest steps of the committed sittings (stages/encoder/steps.cpp's aliases).
DEFAULT_STEP = {"fp16": "fastest_fp16", "fp8": "fastest_fp8"}


def _engine_module():
    # _engine links cuBLASLt, cuDNN and NVRTC. On a node without the CUDA toolkit they come with
    # torch's nvidia wheels, which importing torch loads (the same CUDA major as the wheel's build).
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    try:
        from . import _engine
    except ImportError as e:
        import os
        if ".so" in str(e):
            raise ImportError(f"vitstudy's compiled half cannot load a CUDA library ({e}): install torch built for "
                              "the same CUDA major as this module (its nvidia wheels carry cuBLASLt, cuDNN and "
                              "NVRTC), or the CUDA toolkit and cuDNN") from None
        raise ImportError(f"vitstudy's compiled half is not beside {os.path.dirname(__file__)} ({e}): install the "
                          "module (./study install) and import it from outside the checkout, or put the build "
                          "folder first on PYTHONPATH (PYTHONPATH=build)") from None
    return _engine


def gpu_count():
    """CUDA devices this process sees; 0 without a driver or a device."""
    return _engine_module().gpu_count()


def steps():
    """Every step and alias a Model can run (stages/encoder/steps.tsv)."""
    return _engine_module().steps()


class Model:
    """Logits of a timm VisionTransformer (patch 16, class token, standard blocks) computed by
    the study's forward. Make one with from_timm, from_state_dict or from_safetensors; call it on
    a CUDA tensor [batch, 3, S, S] (fp16, bf16 or fp32, S a multiple of 16, any memory layout) to
    get fp16 logits [batch, classes] on the same device, enqueued on torch's current stream of that
    device (the caller's current device is left as it was); features() gives the pre-logits
    features instead. A headless model (num_classes=0, as timm makes for embeddings) returns its
    features from both. vitstudy.VisionTransformer is the same forward as a torch.nn.Module over a
    registered torch op, for torch.compile and module composition.

    The weights are on the GPU once; a call at a new image size adds that size's position
    embedding (resampled as timm's dynamic_img_size does) and, for FP8, its activation scales. A
    call at a new batch size or image size builds that forward and captures its CUDA graph (the
    first call costs milliseconds; later ones replay it, the graph's copies re-pointed at the
    call's tensors). The forwards are kept, most recently used first, while their device memory
    (activations and buffers) fits `cache_budget` bytes, a quarter of the GPU's memory unless set;
    the forward in use is kept even alone over it. `cache_bytes` is what they hold and
    `free_cache()` frees them (the weights stay)."""

    def __init__(self, state, sizes, step=None, precision="fp16", device=0, calibration=None):
        if precision not in DEFAULT_STEP:
            raise ValueError(f"precision must be one of {sorted(DEFAULT_STEP)}, not {precision!r}")
        self._state = state  # name -> float32 array (numpy), or a safetensors path (str)
        self.sizes = sizes
        self.precision = precision
        self.step_name = step or DEFAULT_STEP[precision]
        self.device = device
        self._calibration = calibration
        self._ready = set()  # image sizes with a position embedding (and FP8 scales)
        self._session = self._open()  # refusals (no GPU, unknown step) now, not on first call

    @classmethod
    def from_safetensors(cls, path, heads=None, **kw):
        """A timm VisionTransformer state dict saved as safetensors (F32, F16 or BF16)."""
        return cls(str(path), timm_weights.sizes_from_state_dict(_safetensors_shapes(path), heads), **kw)

    @classmethod
    def from_state_dict(cls, state_dict, heads=None, **kw):
        """A timm VisionTransformer's state dict (torch tensors or numpy arrays)."""
        arrays = {k: _as_float32(v) for k, v in state_dict.items()}
        sizes = timm_weights.sizes_from_state_dict({k: a.shape for k, a in arrays.items()}, heads)
        return cls(arrays, sizes, **kw)

    @classmethod
    def from_timm(cls, model, **kw):
        """A timm VisionTransformer instance: its features checked, then its state dict."""
        timm_weights.check_timm_module(model)
        return cls.from_state_dict(model.state_dict(), heads=model.blocks[0].attn.num_heads, **kw)

    @property
    def step(self):
        """The step the model runs (an alias resolved)."""
        return _engine_module().resolve_step(self.step_name)

    @property
    def composition(self):
        return self._session.composition

    @property
    def cache_budget(self):
        """Device bytes the kept forwards may hold; setting it drops the least recently used
        beyond it at once."""
        return self._session.budget_bytes

    @cache_budget.setter
    def cache_budget(self, nbytes):
        if not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"cache_budget is a number of bytes >= 0, not {nbytes!r}")
        self._session.budget_bytes = nbytes

    @property
    def cache_bytes(self):
        """Device bytes the kept forwards hold (activations, input and output buffers)."""
        return self._session.held_bytes

    @property
    def forwards_kept(self):
        """The forwards kept, one per batch size and image size called."""
        return self._session.forwards_kept

    @property
    def weight_bytes(self):
        """Device bytes of the weights: once, and a position embedding per other image size."""
        return self._session.weight_bytes

    def free_cache(self):
        """Frees every kept forward (the next call at a size builds it again); the weights stay."""
        self._session.release_forwards()

    @property
    def headless(self):
        """Whether the model has no classifier head (num_classes=0): its calls return features."""
        return self.sizes["num_classes"] == 0

    def __call__(self, images):
        """fp16 logits [batch, classes] of images [batch, 3, S, S] (a headless model's features)."""
        return self.run(images, features=False)

    def features(self, images):
        """fp16 pre-logits features [batch, hidden]: the final LayerNorm's class-token rows, as
        timm's forward_head(forward_features(images), pre_logits=True)."""
        return self.run(images, features=True)

    def width(self, features):
        """The columns of a call's output: hidden for features (and a headless model), else classes."""
        return self.sizes["hidden"] if features or self.headless else self.sizes["num_classes"]

    def run(self, images, features=False):
        """The logits, or with features=True the pre-logits features, of images [batch, 3, S, S]:
        a new fp16 CUDA tensor, enqueued on the current stream of the images' device."""
        import torch
        if not isinstance(images, torch.Tensor):
            raise TypeError(f"images must be a torch tensor, not {type(images).__name__}")
        if images.device.type != "cuda":
            raise ValueError(f"images must be on a CUDA device, not {images.device}")
        if images.device.index != self.device:
            raise ValueError(f"images are on {images.device}; this model is on cuda:{self.device}")
        if images.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError(f"images must be float16, bfloat16 or float32, not {images.dtype}")
        if images.dim() != 4 or images.shape[1] != 3 or images.shape[2] != images.shape[3]:
            raise ValueError(f"images must be [batch, 3, S, S], not {list(images.shape)}")
        batch, size = images.shape[0], images.shape[2]
        if batch < 1 or size < timm_weights.PATCH or size % timm_weights.PATCH:
            raise ValueError(f"batch must be >= 1 and the image size a multiple of {timm_weights.PATCH}, "
                             f"not {batch} x {size}")
        features = features or self.headless
        # fp16 in the engine's layout (channels_last, a view's strides): one copy, or none.
        x = images.to(dtype=torch.float16, memory_format=torch.contiguous_format)
        with torch.cuda.device(images.device):
            out = torch.empty((batch, self.width(features)), dtype=torch.float16, device=images.device)
            try:
                self._prepare(size)
                self._session.run(x.data_ptr(), out.data_ptr(), batch, size,
                                  torch.cuda.current_stream().cuda_stream, features=features)
            except MemoryError as e:  # the engine's out of device memory, as torch's own
                raise torch.cuda.OutOfMemoryError(f"vitstudy: a forward at batch {batch}, {size} px: {e}") from None
        return out

    def _open(self):
        e = _engine_module()
        s = self.sizes
        # A headless model runs with a head of one class of zeros, whose logits no call returns.
        args = dict(hidden=s["hidden"], heads=s["heads"], layers=s["layers"], image_size=s["image_size"],
                    num_classes=max(s["num_classes"], 1), step=self.step_name, device=self.device)
        state = self._state
        if self.headless:
            import numpy as np
            state = dict(self._arrays())
            state["head.weight"] = np.zeros((1, s["hidden"]), dtype=np.float32)
            state["head.bias"] = np.zeros((1,), dtype=np.float32)
        session = e.Session(state, **args) if isinstance(state, dict) else e.Session(path=state, **args)
        if self.precision == "fp8":
            self._calibrate(session, s["image_size"])
        self._ready.add(s["image_size"])
        return session

    def _prepare(self, image_size):
        """That image size's position embedding (and FP8 scales) in the session, once."""
        if image_size in self._ready:
            return
        pos = _resample(self._pos_embed(), image_size)
        self._session.add_image_size(image_size, pos.reshape(-1))
        if self.precision == "fp8":
            self._calibrate(self._session, image_size)
        self._ready.add(image_size)

    def _calibrate(self, session, image_size):
        import torch
        images = self._calibration
        if images is None:
            raise ValueError("precision='fp8' needs calibration images (calibration=[n, 3, S, S] CUDA tensor)")
        if images.shape[2] != image_size:
            images = torch.nn.functional.interpolate(images.float(), size=(image_size, image_size),
                                                     mode="bilinear", antialias=True)
        images = images.to(device=f"cuda:{self.device}", dtype=torch.float16).contiguous()
        stream = torch.cuda.current_stream(self.device)
        session.calibrate(image_size, images.data_ptr(), images.shape[0], stream.cuda_stream)
        stream.synchronize()

    def _pos_embed(self):
        if isinstance(self._state, dict):
            return self._state["pos_embed"]
        from safetensors import safe_open
        with safe_open(self._state, framework="numpy") as f:
            return f.get_tensor("pos_embed").astype("float32")

    def _arrays(self):
        if isinstance(self._state, dict):
            return self._state
        from safetensors.numpy import load_file
        return {k: v.astype("float32") for k, v in load_file(self._state).items()}


def _as_float32(t):
    if hasattr(t, "detach"):  # a torch tensor
        return t.detach().to("cpu").float().contiguous().numpy()
    import numpy as np
    return np.ascontiguousarray(t, dtype=np.float32)


def _resample(pos_embed, image_size):
    import torch
    return timm_weights.resample_pos_embed(torch.from_numpy(pos_embed), image_size).contiguous().numpy()


def _safetensors_shapes(path):
    """{name: shape} from a safetensors file's header, without reading the tensors."""
    import json
    import struct
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{path}: not a safetensors file")
        (n,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(n))
        except ValueError as err:
            raise ValueError(f"{path}: not a safetensors file ({err})") from None
    return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
