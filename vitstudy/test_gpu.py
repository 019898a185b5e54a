"""vitstudy on a GPU with torch and timm: logits against timm's fp32 forward within 1.5x timm fp16's
own error, every parameter randomized (timm's init leaves LayerNorm and biases at constants a
swapped tensor would not show), at timm's size and at another one (the position embedding
resampled as timm does), and the pre-logits features against timm's; a forward kept per batch and
replayed bit for bit on new tensors; the cache's budget across more batch sizes and image sizes
than it holds, and its release; a logits call and a features call on two streams at once, each
input written late; a call on a side stream whose input is written late, after
other work on that stream, reads the input as written; channels_last and strided inputs as their
contiguous copies; a headless model's features against timm's; the torch.nn.Module face inside
torch.compile(fullgraph=True) with the caller's preprocessing, against eager; NaN images give NaN
logits; bad tensors and a full GPU give one clear exception (torch's own out-of-memory error).
Exit 77 (skipped) without torch, timm or a GPU, unless STUDY_REQUIRE_GPU=1."""
import unittest

from needs_gpu import torch_timm_vitstudy

torch, timm, vitstudy = torch_timm_vitstudy()


def randomized(name, img_size=224, seed=0, **kw):
    """timm's model with every parameter drawn: weights N(0, 0.02), LayerNorm gamma 1 + N(0, 0.1),
    biases and beta N(0, 0.02)."""
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, img_size=img_size, **kw).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("weight") and p.dim() == 1:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.02 * torch.randn_like(p))
    return model


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


class Accuracy(unittest.TestCase):
    def check(self, name, batch, size=224):
        vit = randomized(name).cuda()
        model = vitstudy.Model.from_timm(vit)
        torch.manual_seed(batch)
        images = torch.randn(batch, 3, size, size, device="cuda")
        if size != 224:  # timm's reference at that size: timm's own resampling of the position embedding
            vit = timm.create_model(name, pretrained=False, img_size=size).eval().cuda()
            state = randomized(name).state_dict()
            state["pos_embed"] = timm.layers.resample_abs_pos_embed(state["pos_embed"], (size // 16, size // 16))
            vit.load_state_dict(state)
        with torch.no_grad():
            want = vit(images)
            timm_fp16 = vit.half()(images.half())
        got = model(images)
        torch.cuda.synchronize()
        ours, theirs = rel_l2(got, want), rel_l2(timm_fp16, want)
        print(f"{name} {size} px batch {batch}: rel L2 against timm fp32 {ours:.3e}, timm fp16's {theirs:.3e} "
              f"({model.step})")
        self.assertTrue(torch.isfinite(got).all())
        self.assertLessEqual(ours, 1.5 * theirs)

    def test_vit_s(self):
        for batch in (1, 7):
            self.check("vit_small_patch16_224", batch)

    def test_vit_b(self):
        for batch in (7, 64):
            self.check("vit_base_patch16_224", batch)

    def test_vit_b_at_384_px(self):
        self.check("vit_base_patch16_224", 7, size=384)


class Features(unittest.TestCase):
    def test_features_against_timm_pre_logits(self):
        vit = randomized("vit_small_patch16_224").cuda()
        model = vitstudy.Model.from_timm(vit)
        torch.manual_seed(3)
        images = torch.randn(7, 3, 224, 224, device="cuda")
        with torch.no_grad():
            want = vit.forward_head(vit.forward_features(images), pre_logits=True)
            fp16 = vit.half()
            theirs = rel_l2(fp16.forward_head(fp16.forward_features(images.half()), pre_logits=True), want)
        got = model.features(images)
        self.assertEqual(tuple(got.shape), (7, 384))
        ours = rel_l2(got, want)
        print(f"features: rel L2 against timm fp32 {ours:.3e}, timm fp16's {theirs:.3e}")
        self.assertLessEqual(ours, 1.5 * theirs)
        # The logits of the same call are the head of these features (one forward, two outputs).
        logits = model(images)
        head = torch.nn.functional.linear(got.float(), vit.head.weight.float(), vit.head.bias.float())
        self.assertLess(rel_l2(logits, head), 5e-3)

    def test_features_of_every_lane(self):
        # e4_streams splits the batch over two streams, each with its own class-token rows: the
        # same forward as e3_graph's but for GEMMs chosen per lane's rows (~1e-3 apart); a lane's
        # rows missing or misplaced would be ~1 apart.
        vit = randomized("vit_small_patch16_224")
        one, two = vitstudy.Model.from_timm(vit, step="e3_graph"), vitstudy.Model.from_timm(vit, step="e4_streams")
        images = torch.randn(5, 3, 224, 224, device="cuda")
        self.assertLess(rel_l2(two.features(images), one.features(images)), 1e-2)


class Headless(unittest.TestCase):
    def test_a_headless_model_gives_timm_s_features(self):
        # num_classes=0, the usual way to get embeddings: timm's forward gives the pre-logits
        # features, and so do the Model's calls and the module's forward.
        vit = randomized("vit_small_patch16_224", num_classes=0).cuda()
        model = vitstudy.Model.from_timm(vit)
        self.assertTrue(model.headless)
        images = torch.randn(5, 3, 224, 224, device="cuda")
        with torch.no_grad():
            want = vit(images)
            theirs = rel_l2(vit.half()(images.half()), want)
        got = model(images)
        self.assertEqual(tuple(got.shape), (5, 384))
        self.assertTrue(torch.equal(got, model.features(images)))
        self.assertLessEqual(rel_l2(got, want), 1.5 * theirs)
        module = vitstudy.VisionTransformer(model)
        self.assertTrue(torch.equal(module(images), got))
        self.assertTrue(torch.equal(module.forward_head(module.forward_features(images)), got))


class TorchModule(unittest.TestCase):
    """The nn.Module face: one registered op, as torch.compile sees it."""

    @classmethod
    def setUpClass(cls):
        cls.vit = randomized("vit_small_patch16_224").cuda()
        cls.module = vitstudy.VisionTransformer.from_timm(cls.vit)
        cls.images = torch.rand(4, 3, 224, 224, device="cuda")

    def test_forward_features_and_head_read_like_timm_s(self):
        m, x = self.module, self.images
        logits = m(x)
        self.assertTrue(torch.equal(logits, m.model(x)))
        features = m.forward_features(x)
        self.assertTrue(torch.equal(features, m.model.features(x)))
        self.assertTrue(torch.equal(m.forward_head(features, pre_logits=True), features))
        self.assertLess(rel_l2(m.forward_head(features), logits), 5e-3)  # a torch Linear against the engine's head
        self.assertEqual((m.num_classes, m.num_features), (1000, 384))

    def test_compiled_with_its_preprocessing_matches_eager(self):
        class Classifier(torch.nn.Module):
            def __init__(self, vit):
                super().__init__()
                self.vit = vit
                self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1))
                self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1))

            def forward(self, x):
                return self.vit((x - self.mean) / self.std).float().softmax(-1)

        eager = Classifier(self.module)
        compiled = torch.compile(eager, fullgraph=True)
        for batch in (4, 2):
            x = self.images[:batch]
            want = eager(x)
            with torch.inference_mode():
                got = compiled(x)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-2)
        # Inside an autocast region the op takes what the preprocessing gives it.
        with torch.autocast("cuda", dtype=torch.bfloat16):
            self.assertTrue(torch.isfinite(compiled(self.images)).all())

    def test_the_fake_op_gives_shapes_without_running(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            x = torch.empty(6, 3, 224, 224, device="cuda")
            self.assertEqual(tuple(torch.ops.vitstudy.forward(x, self.module.handle, False).shape), (6, 1000))
            self.assertEqual(tuple(torch.ops.vitstudy.forward(x, self.module.handle, True).shape), (6, 384))


class Fp8(unittest.TestCase):
    def test_fp8_against_timm(self):
        # The FP8 forward's own bound (stages/encoder/harness.hpp, kFp8LogitsRelTol): 0.15 relative L2.
        vit = randomized("vit_base_patch16_224").cuda()
        torch.manual_seed(1)
        calibration = torch.randn(32, 3, 224, 224, device="cuda")
        with self.assertRaisesRegex(ValueError, "calibration images"):
            vitstudy.Model.from_timm(vit, precision="fp8")
        model = vitstudy.Model.from_timm(vit, precision="fp8", calibration=calibration)
        images = torch.randn(7, 3, 224, 224, device="cuda")
        with torch.no_grad():
            want = vit(images)
        got = model(images)
        err = rel_l2(got, want)
        print(f"vit_base_patch16_224 FP8 ({model.step}) batch 7: rel L2 against timm fp32 {err:.3e}")
        self.assertEqual(model.step, "e18_fp8_cutlass")
        self.assertTrue(torch.isfinite(got).all())
        self.assertLess(err, 0.15)


class Behaviour(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = vitstudy.Model.from_timm(randomized("vit_small_patch16_224"))
        cls.images = torch.randn(3, 3, 224, 224, device="cuda")

    def test_forward_kept_per_batch_and_replayed_bit_for_bit(self):
        model = vitstudy.Model.from_timm(randomized("vit_small_patch16_224"))
        first = model(self.images)
        again = model(self.images.clone())
        self.assertTrue(torch.equal(first, again))
        model(self.images[:2].contiguous())
        self.assertEqual(model.forwards_kept, 2)
        self.assertTrue(torch.equal(model(self.images), first))
        self.assertEqual(model.forwards_kept, 2)

    def test_the_cache_keeps_its_budget_and_frees(self):
        # More batch sizes and image sizes than the budget holds: the least recently used go,
        # the one in use stays, every answer is the one a fresh model gives.
        model = vitstudy.Model.from_timm(randomized("vit_small_patch16_224"))
        weights = model.weight_bytes
        shapes = [(1, 224), (2, 224), (3, 160), (5, 224), (2, 384), (1, 160)]
        want = {}
        for batch, size in shapes:
            images = torch.randn(batch, 3, size, size, device="cuda", generator=torch.Generator("cuda").manual_seed(batch))
            want[(batch, size)] = (images, model(images).clone())
        self.assertEqual(model.forwards_kept, len(shapes))
        everything = model.cache_bytes
        model.cache_budget = everything // 3
        self.assertLessEqual(model.cache_bytes, everything // 3)
        self.assertLess(model.forwards_kept, len(shapes))
        model.cache_budget = 0  # only the forward in use is kept
        for (batch, size), (images, logits) in want.items():
            self.assertTrue(torch.equal(model(images), logits), (batch, size))
            self.assertEqual(model.forwards_kept, 1)
        model.free_cache()
        self.assertEqual((model.forwards_kept, model.cache_bytes), (0, 0))
        images, logits = want[(2, 384)]
        self.assertTrue(torch.equal(model(images), logits))
        # The weights once: two more image sizes added only their position embeddings.
        self.assertLess(model.weight_bytes - weights, 2 * 577 * 384 * 2 + 1024)
        with self.assertRaisesRegex(ValueError, "cache_budget"):
            model.cache_budget = -1

    def test_logits_and_features_on_two_streams_at_once(self):
        # One forward's buffers under both outputs: a logits call and a features call enqueued on
        # two streams at once, each input written late on its own stream, give what each gives alone.
        model = vitstudy.Model.from_timm(randomized("vit_small_patch16_224"))
        other = torch.randn_like(self.images)
        want_logits, want_features = model(self.images).clone(), model.features(other).clone()
        for _ in range(3):
            a, b = torch.full_like(self.images, float("nan")), torch.full_like(other, float("nan"))
            torch.cuda.synchronize()
            s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
            with torch.cuda.stream(s1):
                torch.cuda._sleep(20_000_000)
                a.copy_(self.images)
                logits = model(a)
            with torch.cuda.stream(s2):
                b.copy_(other)
                features = model.features(b)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(logits, want_logits))
            self.assertTrue(torch.equal(features, want_features))

    def test_new_tensors_each_call(self):
        # One graph per batch size: its copies re-pointed at every call's input and output.
        other = torch.randn_like(self.images)
        want_a, want_b = self.model(self.images).clone(), self.model(other).clone()
        for _ in range(3):
            a, b = self.model(self.images.clone()), self.model(other.clone())
            self.assertTrue(torch.equal(a, want_a))
            self.assertTrue(torch.equal(b, want_b))
        # On another stream, whose work the copies must follow.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            got = self.model(other)
        torch.cuda.current_stream().wait_stream(side)
        self.assertTrue(torch.equal(got, want_b))

    def test_a_side_stream_whose_input_is_written_late(self):
        # The input is written on the side stream after ~20 ms of other work there: a call
        # enqueued anywhere but the side stream reads the poison (NaN) instead.
        want = self.model(self.images).clone()
        x = torch.full_like(self.images, float("nan"))
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(40_000_000)
            x.copy_(self.images)
            got = self.model(x)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(got, want))

    def test_any_memory_layout(self):
        want = self.model(self.images)
        self.assertTrue(torch.equal(self.model(self.images.to(memory_format=torch.channels_last)), want))
        strided = self.images.transpose(2, 3)
        self.assertTrue(torch.equal(self.model(strided), self.model(strided.contiguous())))

    def test_the_callers_device_stays_current(self):
        if torch.cuda.device_count() < 2:
            self.skipTest("one CUDA device: the engine's device is the caller's")
        model = vitstudy.Model.from_timm(randomized("vit_small_patch16_224"), device=1)
        torch.cuda.set_device(0)
        out = model(self.images.to("cuda:1"))
        self.assertEqual(torch.cuda.current_device(), 0)
        self.assertEqual(out.device, torch.device("cuda:1"))

    def test_full_gpu_gives_memory_error(self):
        # Everything but 64 MiB held by torch: a new batch size cannot get its activations.
        model = vitstudy.Model.from_timm(randomized("vit_small_patch16_224"))
        images = torch.randn(64, 3, 224, 224, device="cuda")
        torch.cuda.synchronize()
        free, _ = torch.cuda.mem_get_info()
        block = torch.empty(free - (64 << 20), dtype=torch.uint8, device="cuda")
        with self.assertRaisesRegex(torch.cuda.OutOfMemoryError, "batch 64"):
            model(images)
        del block
        torch.cuda.empty_cache()
        self.assertTrue(torch.isfinite(model(images)).all())  # and the model still works

    def test_input_dtypes_converted_as_torch_converts(self):
        for dtype in (torch.float32, torch.bfloat16):
            images = self.images.to(dtype)
            self.assertTrue(torch.equal(self.model(images), self.model(images.half())), dtype)

    def test_position_embedding_resampled_as_timm_does(self):
        pos = torch.randn(1, 197, 384)
        for size in (224, 384, 160):
            grid = size // 16
            self.assertTrue(torch.equal(vitstudy.timm_weights.resample_pos_embed(pos, size),
                                        timm.layers.resample_abs_pos_embed(pos, (grid, grid))), size)

    def test_nan_images_give_nan_logits(self):
        images = self.images.clone()
        images[1] = float("nan")
        out = self.model(images)
        self.assertTrue(torch.isnan(out[1]).all())
        self.assertTrue(torch.isfinite(out[0]).all())

    def test_bad_tensors(self):
        for images, words in ((self.images.cpu(), "CUDA device"),
                              (self.images.to(torch.int32), "float16, bfloat16 or float32"),
                              (self.images[:, :2].contiguous(), r"\[batch, 3, S, S\]"),
                              (torch.randn(1, 3, 200, 200, device="cuda"), "multiple of 16"),
                              (self.images.tolist(), "torch tensor")):
            with self.subTest(words=words), self.assertRaisesRegex((ValueError, TypeError), words):
                self.model(images)

    def test_unsupported_timm_models(self):
        for name, kw, words in (("vit_small_patch16_224", dict(global_pool="avg", fc_norm=False), "global_pool"),
                                ("vit_small_patch16_224", dict(init_values=1e-5), "layer scale"),
                                ("vit_small_patch16_224", dict(qk_norm=True), "q_norm"),
                                ("vit_small_patch16_224", dict(reg_tokens=4), "register tokens"),
                                ("vit_small_patch14_dinov2", dict(), "layer scale|patch size")):
            with self.subTest(name=name, kw=kw), self.assertRaisesRegex(vitstudy.Unsupported, words):
                vitstudy.Model.from_timm(timm.create_model(name, pretrained=False, **kw))


if __name__ == "__main__":
    unittest.main()
