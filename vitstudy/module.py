"""vitstudy.VisionTransformer: the study's forward of a timm VisionTransformer as a torch.nn.Module,
its calls one registered torch op (vitstudy/torch_op.py), so that it composes with a model's own
layers and torch.compile(fullgraph=True) or torch.export hold it as one node."""
import weakref

import torch

from . import torch_op
from .model import Model


class VisionTransformer(torch.nn.Module):
    """A timm VisionTransformer run by one of the study's encoder steps, read like timm's:
    forward(x) gives the logits (a headless model's, num_classes=0: its pre-logits features),
    forward_features(x) the pre-logits features [batch, embed_dim] (the final LayerNorm's class
    token, what timm's forward_head(forward_features(x), pre_logits=True) returns: the engine
    computes no other token's output), and forward_head(features, pre_logits=False) the
    classifier on them. Inputs: CUDA tensors [batch, 3, S, S], fp16, bf16 or fp32, any memory
    layout, S a multiple of 16; outputs fp16 on the same device, enqueued on its current stream.
    The weights live in the engine on the model's device (`.to()` does not move them); the
    classifier head is also a torch Linear (fp16), for forward_head. Inference only: the op has no
    backward."""

    def __init__(self, model):
        super().__init__()
        if not isinstance(model, Model):
            raise TypeError(f"VisionTransformer wraps a vitstudy.Model, not {type(model).__name__}")
        self.model = model
        sizes = model.sizes
        self.num_classes = sizes["num_classes"]
        self.headless = model.headless  # its forward gives the features (a plain bool for torch.compile)
        self.embed_dim = self.num_features = sizes["hidden"]
        self.handle = torch_op.register(model)
        weakref.finalize(self, torch_op.unregister, self.handle)
        if model.headless:
            self.head = torch.nn.Identity()
        else:
            arrays = model._arrays()
            self.head = torch.nn.Linear(self.embed_dim, self.num_classes, device=f"cuda:{model.device}",
                                        dtype=torch.float16)
            with torch.no_grad():
                self.head.weight.copy_(torch.from_numpy(arrays["head.weight"]))
                self.head.bias.copy_(torch.from_numpy(arrays["head.bias"]))
            self.head.requires_grad_(False)

    @classmethod
    def from_timm(cls, model, **kw):
        """From a timm VisionTransformer instance (Model.from_timm's arguments: step, precision,
        device, calibration)."""
        return cls(Model.from_timm(model, **kw))

    @classmethod
    def from_state_dict(cls, state_dict, heads=None, **kw):
        return cls(Model.from_state_dict(state_dict, heads=heads, **kw))

    @classmethod
    def from_safetensors(cls, path, heads=None, **kw):
        return cls(Model.from_safetensors(path, heads=heads, **kw))

    def forward_features(self, x):
        return torch.ops.vitstudy.forward(x, self.handle, True)

    def forward_head(self, x, pre_logits=False):
        return x if pre_logits else self.head(x)

    def forward(self, x):
        # One op: the engine's own head (the logits come out of the forward's graph), not
        # forward_head over the features.
        return torch.ops.vitstudy.forward(x, self.handle, self.headless)

    def extra_repr(self):
        return f"step={self.model.step_name}, precision={self.model.precision}, device=cuda:{self.model.device}"
