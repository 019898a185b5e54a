"""vitstudy: a timm VisionTransformer run by the study's fastest forward, on torch tensors.

    import timm, torch, vitstudy
    vit = timm.create_model("vit_base_patch16_224", pretrained=False).eval()
    model = vitstudy.Model.from_timm(vit)                 # fp16, the fastest fp16 step
    logits = model(torch.randn(8, 3, 224, 224, device="cuda"))

vitstudy.VisionTransformer is the same forward as a torch.nn.Module whose calls are one registered
torch op (torch.ops.vitstudy.forward), for torch.compile(fullgraph=True), torch.export and module
composition; it needs torch, which `import vitstudy` alone does not.

The compiled half (vitstudy._engine) is built with the repository's Meson build (./study install,
pip install ., or ./study test into build/vitstudy/)."""
from .model import DEFAULT_STEP, Model, gpu_count, steps
from .timm_weights import Unsupported

__all__ = ["DEFAULT_STEP", "Model", "Unsupported", "VisionTransformer", "gpu_count", "steps"]


def __getattr__(name):
    # The module face imports torch (and registers its op) on first use, not with vitstudy.
    if name == "VisionTransformer":
        from .module import VisionTransformer
        return VisionTransformer
    raise AttributeError(f"module 'vitstudy' has no attribute {name!r}")
