"""nearid.gemm: training's products in OpenBLAS give torch's results (values and gradients)."""

import pytest
import torch
import torch.nn.functional as F

from nearid import gemm, kernels

pytestmark = pytest.mark.skipif(not gemm.active(), reason="OpenBLAS products need portable kernels on AVX2")

TOL = dict(rtol=1e-4, atol=1e-4)  # float32 sums in another order: agreement to about 1e-6 relative


def _both(fn, *shapes, seed=0):
    """fn's value and input gradients, in torch and under OpenBLASProducts (which must route it)."""
    gen = torch.Generator().manual_seed(seed)
    base = [torch.randn(*s, generator=gen) for s in shapes]
    out = []
    for routed in (False, True):
        xs = [b.clone().requires_grad_() for b in base]
        mode = gemm.OpenBLASProducts(min_macs=1) if routed else None
        if routed:
            with mode:
                y = fn(*xs)
        else:
            y = fn(*xs)
        (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape)).sum().backward()
        out.append((y.detach(), [x.grad for x in xs], mode))
    (y0, g0, _), (y1, g1, mode) = out
    assert mode.counts_, "the product was not routed to OpenBLAS"
    torch.testing.assert_close(y1, y0, **TOL)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, **TOL)
    return mode.counts_


def test_linear_matches_torch():
    assert _both(lambda x, w, b: F.linear(x, w, b), (5, 7, 33), (19, 33), (19,)) == {"linear": 1}


def test_matmul_and_bmm_match_torch():
    assert _both(lambda a, b: a @ b, (4, 6, 9), (4, 9, 5)) == {"matmul": 1}
    assert _both(lambda a, b: torch.bmm(a, b), (3, 8, 2), (3, 2, 7)) == {"matmul": 1}
    assert _both(lambda a, b: torch.matmul(a, b), (2, 3, 6, 9), (9, 4)) == {"matmul": 1}


@pytest.mark.parametrize("kernel,stride,padding,dilation", [(3, 1, 0, 1), (3, 2, 1, 1), (4, 2, 1, 1), (3, 1, 2, 2),
                                                           ((3, 2), (2, 1), (1, 0), 1), (1, 2, 0, 1)])
def test_conv2d_matches_torch(kernel, stride, padding, dilation):
    """Values and gradients of every input, channels-last windows (and im2col for dilation)."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation)  # noqa: E731
    assert _both(fn, (3, 4, 11, 10), (6, 4, kh, kw), (6,)) == {"conv2d": 1}


def test_kernel_matrix_gives_the_whole_array_permutations_bits():
    """The convolution's weight matrix is a transposed view of a per-channel permutation (a copy
    that stays in cache), not a permutation of the whole array: the same products to the bit,
    and the same weight gradient, forward and backward, through a 3x3 and a 4x4 kernel."""
    gen = torch.Generator().manual_seed(3)
    for c_out, c_in, k, n in [(64, 32, 3, 6), (16, 3, 4, 5)]:
        x = torch.randn(n, c_in, 9, 9, generator=gen)
        w = torch.randn(c_out, c_in, k, k, generator=gen)
        grads, outs = [], []
        for new_layout in (True, False):
            wi = w.clone().requires_grad_()
            win = gemm._Windows.apply(x.permute(0, 2, 3, 1), k, k, (1, 1), (1, 1))
            rows = win.reshape(-1, win.shape[-3] * win.shape[-2] * win.shape[-1])
            b = gemm._KernelMatrix.apply(wi) if new_layout else wi.permute(2, 3, 1, 0).reshape(-1, c_out)
            out = gemm.matmul(rows, b)
            (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
            outs.append(out.detach())
            grads.append(wi.grad)
        assert torch.equal(outs[0], outs[1]) and torch.equal(grads[0], grads[1])
        assert grads[0].is_contiguous()  # the parameter's own layout: AccumulateGrad copies nothing


def _in_order(w: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """``w`` with its usual shape, stored in memory in ``order`` (as WeightsAsGradients keeps it)."""
    return w.permute(order).contiguous().permute(*sorted(range(w.dim()), key=order.__getitem__))


@pytest.mark.parametrize("c_out, c_in, k, stride, padding", [(64, 32, 3, 1, 1), (128, 64, 1, 2, 0)])
def test_conv_weights_stored_in_their_products_order_give_the_same_bits(c_out, c_in, k, stride, padding):
    """A convolution whose weights are stored (kh, kw, c_in, c_out) reads them as they are and
    hands back a gradient in that layout: the output and both gradients equal the usual
    layout's bit for bit, routed to OpenBLAS or, for a batch too small to route, in torch's own
    kernels (which copy the weights contiguous first). Not so for torch's transposed
    convolution, which reads strided weights as they are and sums in another order: so
    WeightsAsGradients leaves transposed convolutions alone."""
    kernels.configure_torch()
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(c_out, c_in, k, k, generator=gen)
    order = (2, 3, 1, 0)
    for n, routes in [(6, True), (1, False)]:
        x = torch.randn(n, c_in, 5, 5, generator=gen)
        runs = []
        for stored in (True, False):
            wi = (_in_order(w, order) if stored else w.clone()).requires_grad_()
            xi = x.clone().requires_grad_()
            with gemm.OpenBLASProducts(min_macs=3 * w.numel() * 25) as mode:  # 6 images route, 1 not
                out = F.conv2d(xi, wi, None, stride, padding)
            (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
            assert bool(mode.counts_) is routes
            # AccumulateGrad keeps the stored layout
            assert (wi.grad.permute(order) if stored else wi.grad).is_contiguous()
            runs.append((out.detach(), xi.grad, wi.grad))
        assert all(torch.equal(a, b) for a, b in zip(*runs))
    assert gemm._kernel_matrix(_in_order(w, order))._base is not None  # a view: no copy

    wt = torch.randn(64, 32, 3, 3, generator=gen)  # torch's transposed convolution, for contrast
    x = torch.randn(1, 64, 5, 5, generator=gen)
    outs = [F.conv_transpose2d(x, v, None, 2, 1) for v in (wt, _in_order(wt, (0, 2, 3, 1)))]
    assert not torch.equal(*outs)


def test_stacked_convolutions_pass_channels_last_views_along():
    """A conv's output is a channels-last view; the next conv and its gradient read it as is."""
    def net(x, w1, w2, w3):
        h = F.relu(F.conv2d(x, w1, stride=2, padding=1))
        h = F.relu(F.conv_transpose2d(F.conv2d(h, w2, stride=2, padding=1), w3, stride=2, padding=1))
        return h.flatten(1)
    assert _both(net, (2, 3, 16, 16), (8, 3, 4, 4), (8, 8, 4, 4), (8, 5, 4, 4)) == {"conv2d": 2, "conv_transpose2d": 1}


@pytest.mark.parametrize("stride,padding,output_padding", [(2, 1, 0), (2, 1, 1), (1, 0, 0), (3, 2, 1)])
def test_conv_transpose2d_matches_torch(stride, padding, output_padding):
    fn = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=stride, padding=padding,  # noqa: E731
                                            output_padding=output_padding)
    assert _both(fn, (2, 5, 6, 7), (5, 3, 4, 4), (3,)) == {"conv_transpose2d": 1}


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_torch(causal):
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    assert _both(fn, (2, 3, 5, 8), (2, 3, 5, 8), (2, 3, 5, 8)) == {"attention": 1}


def test_attention_with_a_boolean_mask_matches_torch():
    mask = torch.rand(5, 6) > 0.3
    mask[:, 0] = True  # every query sees a key
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    assert _both(fn, (2, 5, 8), (2, 6, 8), (2, 6, 4)) == {"attention": 1}


@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_an_additive_float_mask_matches_torch(causal):
    """A float mask is added to the scores (the written-out path), the causal mask too."""
    gen = torch.Generator().manual_seed(2)
    mask = torch.randn(5, 5, generator=gen)
    q, k, v = (torch.randn(2, 5, 8, generator=gen) for _ in range(3))
    both = mask.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf")) if causal else mask
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=both)  # torch takes one or the other
    torch.testing.assert_close(gemm.attention(q, k, v, attn_mask=mask, is_causal=causal), expected, **TOL)


def _attention_written_out(q, k, v, mask, causal, scale):
    """The attention as it was written before :class:`nearid.gemm._Attention`: every step recorded
    by autograd (scaling, masking and their backward each in a new array)."""
    lead, L, S = q.shape[:-2], q.shape[-2], k.shape[-2]
    qf, kf, vf = (t.reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    scores = (gemm.matmul(qf, kf.transpose(-1, -2)) * scale).reshape(*lead, L, S)
    if causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1).reshape(-1, L, S)
    return gemm.matmul(weights, vf).reshape(*lead, L, v.shape[-1])


@pytest.mark.parametrize("causal, masked", [(False, False), (True, False), (False, True), (True, True)])
def test_attention_scales_and_masks_in_place_to_the_same_bits(causal, masked):
    """_Attention scales and masks the scores in place and writes its backward by hand: the
    output and the gradients of q, k and v are those of the written-out steps, bit for bit."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(3, 4, 12, 16, generator=gen) for _ in range(3))
    mask = (torch.rand(3, 1, 12, 12, generator=gen) > 0.3) if masked else None
    if mask is not None:
        mask[..., 0] = True  # every query sees a key
    weights = torch.randn(3, 4, 12, 16, generator=gen)
    results = []
    for fused in (True, False):
        xs = [t.clone().requires_grad_() for t in (q, k, v)]
        out = (gemm.attention(*xs, attn_mask=mask, is_causal=causal, scale=0.3) if fused
               else _attention_written_out(*xs, mask, causal, 0.3))
        (out * weights).sum().backward()
        results.append([out.detach(), *(x.grad for x in xs)])
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_what_stays_in_torch():
    """Small products, float64, groups, and tensors inside torch.func transforms are not routed."""
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    with gemm.OpenBLASProducts() as mode:  # the default threshold: 96 multiply-adds stay in torch
        F.linear(x, w)
        F.linear(x.double(), w.double())
        F.conv2d(torch.randn(1, 4, 64, 64), torch.randn(4, 1, 3, 3), groups=4)
        big = torch.randn(256, 512)
        torch.func.vmap(lambda a: F.linear(a, big))(torch.randn(3, 512, 512))
    assert mode.counts_ == {}


def test_training_uses_it_and_is_repeatable():
    """fit() routes the model's products, and two runs give the same weights bit for bit."""
    from nearid.models.autoencoder import MLPAutoencoder
    from nearid.train import Recipe, fit

    X = torch.rand(256, 784)
    weights = []
    for _ in range(2):
        torch.manual_seed(0)
        model = MLPAutoencoder(784, 8, hidden=(128, 64))
        res = fit(model, X, Recipe(epochs=2, batch_size=64), seed=0)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert res.steps == 8 and res.losses[1] < res.losses[0]
    assert torch.equal(weights[0], weights[1])


def test_switch_and_signature(monkeypatch):
    assert kernels.products() == "OpenBLAS" and "products=OpenBLAS" in kernels.signature()
    monkeypatch.setenv(kernels.PRODUCTS_ENV, "1")
    assert kernels.products() == "MKL" and not gemm.active()
    assert "products=MKL" in kernels.signature()
    assert kernels.record()["settings"][kernels.PRODUCTS_KEY] == "MKL"
    with gemm.portable_products() as mode:
        assert mode is None


def _with_torch_linears(model):
    """The same model with every gemm.Linear swapped for a plain nn.Linear holding its weights."""
    for name, child in model.named_children():
        if isinstance(child, gemm.Linear):
            plain = torch.nn.Linear(child.in_features, child.out_features)
            plain.load_state_dict(child.state_dict())
            setattr(model, name, plain)
        else:
            _with_torch_linears(child)
    return model


def test_layers_that_route_themselves_train_as_the_mode_did(monkeypatch):
    """An MLP of gemm.Linear layers trains without the mode and gives, bit for bit, what the
    same MLP of plain nn.Linear layers gives under the mode; its products are routed."""
    from nearid.models.autoencoder import MLPAutoencoder
    from nearid.train import Recipe, fit, predict

    X = torch.rand(320, 784)
    torch.manual_seed(0)
    own = MLPAutoencoder(784, 8, hidden=(128, 64), decoder_slope=0.2)
    moded = _with_torch_linears(MLPAutoencoder(784, 8, hidden=(128, 64), decoder_slope=0.2))
    moded.load_state_dict(own.state_dict())
    moded.products_in_modules = False  # plain layers: fit must enter the mode for them
    assert gemm.products_in_modules(own) and gemm.products_in_modules(own.encode)

    modes, routed = [], []
    enter = gemm.OpenBLASProducts.__enter__
    monkeypatch.setattr(gemm.OpenBLASProducts, "__enter__", lambda self: modes.append(self) or enter(self))
    linear = gemm.linear
    monkeypatch.setattr(gemm, "linear", lambda *a: routed.append(a[0].shape) or linear(*a))
    fit(own, X, Recipe(epochs=2, batch_size=64, weight_decay=1e-4), seed=3)
    assert not modes and routed, "gemm.Linear should route itself, with no mode"
    n_own = len(routed)
    fit(moded, X, Recipe(epochs=2, batch_size=64, weight_decay=1e-4), seed=3)
    assert modes and sum(m.counts_.get("linear", 0) for m in modes) == len(routed) - n_own
    for a, b in zip(own.parameters(), moded.parameters()):
        assert torch.equal(a, b)
    assert torch.equal(torch.as_tensor(predict(own.encode, X)), torch.as_tensor(predict(moded.encode, X)))


def test_gemm_linear_is_nn_linear_outside_the_products_context():
    layer = gemm.Linear(784, 128)
    x = torch.rand(64, 784)
    assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    with gemm.portable_products() as mode:
        assert mode is not None
        with gemm.portable_products(mode=False) as none:
            assert none is None and gemm._ROUTING.get()
        assert gemm._ROUTING.get()
    assert not gemm._ROUTING.get()
