"""A timm VisionTransformer's weights as the study's forward reads them: the features it does not
compute refused by name (from the module, or from a state dict's names and shapes alone), the
model's sizes read from the shapes, and the position embedding resampled as timm resamples it.
Needs no torch until a tensor is converted."""
import re

PATCH = 16
# timm's ViT-Ti/S/B/L keep a head dimension of 64; a state dict does not say the head count.
HEAD_DIM = 64


class Unsupported(ValueError):
    """A model with a feature the study's forward does not compute."""


def sizes_from_state_dict(shapes, heads=None):
    """hidden, heads, layers, num_classes (0 for a headless model) and the image size the position
    embedding is for, from {name: shape}; Unsupported naming the first feature the forward does not
    compute."""
    names = set(shapes)
    features = [
        (lambda n: re.search(r"\.ls[12]\.", n), "layer scale (blocks.*.ls1 / ls2)"),
        (lambda n: re.search(r"\.(q|k)_norm\.", n), "qk-norm (blocks.*.attn.q_norm / k_norm)"),
        (lambda n: n == "reg_token", "register tokens (reg_token)"),
        (lambda n: n.startswith("fc_norm."), "global average pooling (fc_norm)"),
        (lambda n: n.startswith("norm_pre."), "a pre-norm before the blocks (norm_pre)"),
        (lambda n: n.startswith("attn_pool."), "attention pooling (attn_pool)"),
        (lambda n: re.search(r"\.(norm|ln)\.(weight|bias)$", n) and ".attn." in n, "a norm inside attention"),
    ]
    for found, feature in features:
        hit = sorted(n for n in names if found(n))
        if hit:
            raise Unsupported(f"the study's forward does not compute {feature}: '{hit[0]}'")
    if "cls_token" not in names:
        raise Unsupported("the study's forward needs a class token (no 'cls_token')")
    patch = shapes.get("patch_embed.proj.weight")
    if patch is None or len(patch) != 4 or patch[1] != 3:
        raise ValueError("not a timm VisionTransformer state dict: no 'patch_embed.proj.weight' [hidden, 3, p, p]")
    if tuple(patch[2:]) != (PATCH, PATCH):
        raise Unsupported(f"the study's forward computes patch size {PATCH} only, not {patch[2]}x{patch[3]}")
    if "blocks.0.attn.qkv.bias" not in names:
        raise Unsupported("the study's forward needs biases on the QKV projection (qkv_bias=True)")
    hidden = patch[0]
    layers = len({int(m.group(1)) for n in names if (m := re.match(r"blocks\.(\d+)\.", n))})
    mlp = shapes.get("blocks.0.mlp.fc1.weight", (0,))[0]
    if mlp != 4 * hidden:
        raise Unsupported(f"the study's forward computes an MLP of 4 x hidden ({4 * hidden}), not {mlp}")
    head = shapes.get("head.weight", (0,))  # none: a headless model (num_classes=0)
    tokens = shapes["pos_embed"][1]
    grid = round((tokens - 1) ** 0.5)
    if grid * grid != tokens - 1:
        raise Unsupported(f"a position embedding of {tokens} tokens is not a class token and a square grid")
    if heads is None and hidden % HEAD_DIM:
        raise ValueError(f"hidden {hidden} is not a multiple of timm's head dimension {HEAD_DIM}: "
                         f"say how many heads (heads=...)")
    heads = heads or hidden // HEAD_DIM
    if heads <= 0 or hidden % heads:
        raise ValueError(f"{heads} heads do not divide hidden {hidden}")
    return dict(hidden=hidden, heads=heads, layers=layers, num_classes=head[0], image_size=grid * PATCH)


def check_timm_module(model):
    """Unsupported naming the first feature of a timm VisionTransformer that the state dict does
    not show: the activation, the LayerNorm's epsilon, the pooling and the class token."""
    name = type(model).__name__
    if name != "VisionTransformer":
        raise Unsupported(f"a timm VisionTransformer is needed, not {name}")
    pool = getattr(model, "global_pool", "token")
    if pool != "token":
        raise Unsupported(f"the study's forward pools the class token, not global_pool='{pool}'")
    if getattr(model, "num_reg_tokens", 0):
        raise Unsupported(f"the study's forward does not compute register tokens ({model.num_reg_tokens})")
    if not getattr(model, "has_class_token", True) or getattr(model, "no_embed_class", False):
        raise Unsupported("the study's forward needs a class token with its position embedding")
    for i, block in enumerate(model.blocks):
        act = block.mlp.act
        if type(act).__name__ != "GELU" or getattr(act, "approximate", "none") != "none":
            raise Unsupported(f"blocks.{i}.mlp.act is {act}: the study's forward computes the exact GELU")
        for norm in ("norm1", "norm2"):
            ln = getattr(block, norm)
            if type(ln).__name__ != "LayerNorm" or abs(ln.eps - 1e-6) > 1e-12:
                raise Unsupported(f"blocks.{i}.{norm} is {ln}: the study's forward computes LayerNorm with eps 1e-6")
        for part in ("ls1", "ls2"):
            if type(getattr(block, part, None)).__name__ not in ("Identity", "NoneType"):
                raise Unsupported(f"the study's forward does not compute layer scale (blocks.{i}.{part})")
        for part in ("q_norm", "k_norm", "norm"):
            if type(getattr(block.attn, part, None)).__name__ not in ("Identity", "NoneType"):
                raise Unsupported(f"the study's forward does not compute blocks.{i}.attn.{part}")


def resample_pos_embed(pos_embed, image_size):
    """[1, 1 + g*g, hidden] -> [1, 1 + n*n, hidden] for n = image_size / 16, as timm's
    resample_abs_pos_embed does it (bicubic with antialiasing over the grid; the class token's
    row kept). A torch tensor in, a torch tensor out."""
    import torch
    import torch.nn.functional as F
    tokens, hidden = pos_embed.shape[1], pos_embed.shape[2]
    old, new = round((tokens - 1) ** 0.5), image_size // PATCH
    if old == new:
        return pos_embed
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    grid = grid.reshape(1, old, old, hidden).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=(new, new), mode="bicubic", antialias=True)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new * new, hidden).to(pos_embed.dtype)
    return torch.cat([cls, grid], dim=1)
