"""The study's forward as a registered torch op, torch.ops.vitstudy.forward(images, handle,
features): what torch.compile, torch.export and a module see instead of a Python call into the
engine. `handle` names a registered runner (a vitstudy.Model, or anything with its run(images,
features) and width(features)); the fake implementation gives the output's shape and dtype from
it without running anything, so a compiled graph holds the op as one node. Needs torch 2.4 or
newer (torch.library.custom_op)."""
import itertools

import torch

_RUNNERS = {}
_HANDLES = itertools.count(1)


def register(runner):
    """A new handle for `runner`; the caller unregisters it when done (VisionTransformer does when
    it is collected)."""
    handle = next(_HANDLES)
    _RUNNERS[handle] = runner
    return handle


def unregister(handle):
    _RUNNERS.pop(handle, None)


def _runner(handle):
    try:
        return _RUNNERS[handle]
    except KeyError:
        raise ValueError(f"vitstudy: no model registered as handle {handle} (its module was collected?)") from None


@torch.library.custom_op("vitstudy::forward", mutates_args=())
def forward(images: torch.Tensor, handle: int, features: bool) -> torch.Tensor:
    """fp16 [batch, classes] logits, or [batch, hidden] pre-logits features with `features`, of
    images [batch, 3, S, S], on the current stream of their device."""
    return _runner(handle).run(images, features)


@forward.register_fake
def _(images, handle, features):
    return images.new_empty((images.shape[0], _runner(handle).width(features)), dtype=torch.float16)
