"""vitstudy: a timm VisionTransformer run by the study's fastest forward, on torch tensors.

    import timm, torch, vitstudy
    vit = timm.create_model("vit_base_patch16_224", pretrained=False).eval()
    model = vitstudy.Model.from_timm(vit)                 # fp16, the fastest fp16 step
    logits = model(torch.randn(8, 3, 224, 224, device="cuda"))

The compiled half (vitstudy._engine) is built with the repository's Meson build (./study install,
pip install ., or ./study test into build/vitstudy/)."""
from .model import DEFAULT_STEP, MAX_IMAGE_SIZES, Model, gpu_count, steps
from .timm_weights import Unsupported

__all__ = ["DEFAULT_STEP", "MAX_IMAGE_SIZES", "Model", "Unsupported", "gpu_count", "steps"]
