"""Training-time VQ (k-means, EMA, Gumbel pseudo-gradient) and the locality loss."""

from __future__ import annotations

import pytest
import torch

from inference import VQOPT, VQOPTConfig, kernels
from inference.positions import spread_positions
from training.locality import edit_hinge, layer_shares, locality_loss, make_edits, margin_hinge, plane_distance
from training.vq import TrainQuantizer, distances, kmeans, kmeans_init


def tiny_net(heads=2) -> VQOPT:
    torch.manual_seed(0)
    cfg = VQOPTConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        ffn_dim=32,
        max_position_embeddings=32,
        position_pool=3200,
        position_repeat=100,
        window_tokens=32,
        attention_scale=1 / 16,
        vq_heads=heads,
        vq_codes=8,
    )
    return VQOPT(cfg)


def test_kmeans_finds_separated_clusters():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = (centres[torch.arange(300) % 3] + 0.1 * torch.randn(300, 2, generator=g))[:, None, :]  # (N, 1, 2)
    cent = kmeans(x, 3, iters=10, generator=g)[0]  # (3, 2)
    nearest = torch.cdist(centres, cent).min(-1).values
    assert (nearest < 0.2).all(), cent


def test_forward_value_is_the_hard_code_bit_exactly_and_gradient_reaches_s():
    net = tiny_net()
    quant = TrainQuantizer(net, pseudo_grad="gumbel")
    s = torch.randn(3, 5, 16, requires_grad=True)
    z, codes = quant(0, s)
    book = net.layers[0].vq.codebook
    expect = distances(s.detach().reshape(-1, 2, 8), book).argmin(-1).reshape(3, 5, 2)
    assert torch.equal(codes, expect)
    hard = book[torch.arange(2), codes].flatten(-2)  # (3, 5, 16)
    assert torch.equal(z, hard)  # no rounding noise leaks into the forward value
    (z * torch.randn_like(z)).sum().backward()
    assert s.grad is not None and s.grad.abs().sum() > 0


def test_ema_moves_codes_to_their_members_and_reseeds_dead_codes():
    net = tiny_net(heads=1)
    quant = TrainQuantizer(net, decay=0.5, dead_threshold=0.5)
    s = torch.randn(1, 64, 16) * 0.01 + 3.0  # all rows near one point: most codes go unused
    for _ in range(8):
        quant(0, s)
        quant.update()
    book = net.layers[0].vq.codebook[0]  # (K, w)
    assert torch.cdist(book, s[0]).min() < 0.1  # the used code moved onto the rows
    assert quant.reseeded > 0  # unused codes were re-seeded from recent rows


def test_a_dead_threshold_of_zero_never_reseeds_so_unused_codes_stay_where_they_were():
    """`distill --dead-threshold 0` continues a trained model without moving the codes it never uses."""
    net = tiny_net(heads=1)
    quant = TrainQuantizer(net, decay=0.5, dead_threshold=0.0)
    before = net.layers[0].vq.codebook[0].clone()  # (K, w)
    s = torch.randn(1, 64, 16) * 0.01 + 3.0  # all rows near one point: most codes go unused
    for _ in range(8):
        quant(0, s)
        quant.update()
    book = net.layers[0].vq.codebook[0]
    used = distances(s.reshape(-1, 1, 16), net.layers[0].vq.codebook).argmin(-1).unique()
    unused = [k for k in range(book.shape[0]) if k not in used.tolist()]
    assert quant.reseeded == 0 and unused
    assert torch.allclose(book[unused], before[unused])


def refit_net(live: int) -> tuple[VQOPT, list]:
    """tiny_net with layer 0 refitted to `live` codes per head on random text; the batches it read."""
    net = tiny_net()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 50, (2, 24), generator=g), spread_positions(24, 3200).expand(2, 24))]
    with torch.no_grad():
        kmeans_init(net, batches, generator=g, live={0: live})
    return net, batches


def test_a_refit_keeps_that_many_codes_live_parks_the_rest_and_leaves_other_layers_alone():
    before = tiny_net().layers[1].vq.codebook.detach().clone()
    net, batches = refit_net(live=3)
    parked = kernels.parked_codes(net.layers[0].vq.codebook)  # (h, K)
    assert parked.tolist() == [[False] * 3 + [True] * 5] * 2
    with torch.no_grad():
        codes = net(*batches[0], vq=True).codes[0]
    assert codes.max() < 3 and len(codes.unique()) == 3  # every live code used, no parked one
    assert torch.equal(net.layers[1].vq.codebook, before)


def test_parked_codes_stay_parked_through_the_ema_and_dead_code_reseeding():
    """A parked code is never assigned, so its EMA count falls: it must not be averaged towards
    nothing nor re-seeded, or the layer would get its codes back."""
    net, batches = refit_net(live=3)
    quant = TrainQuantizer(net, decay=0.5, dead_threshold=0.5)
    for _ in range(30):
        net(*batches[0], quantizer=quant)
        quant.update()
    parked = kernels.parked_codes(net.layers[0].vq.codebook)
    assert parked[:, 3:].all() and not parked[:, :3].any()


def test_margin_hinge_is_zero_deep_inside_a_cell_and_positive_at_a_boundary():
    book = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])  # (h=1, K=2, w=2)
    inside = torch.tensor([[[1.0, 0.1]]])  # (B, T, d)
    boundary = torch.tensor([[[0.0, 1.0]]])
    ref = torch.zeros(1, 1, 1, dtype=torch.long)
    assert margin_hinge(inside, ref, book, 0.05).item() == 0.0
    assert margin_hinge(boundary, ref, book, 0.05).item() > 0.0


def test_plane_distance_is_the_euclidean_distance_to_the_cells_nearest_boundary():
    book = torch.tensor([[[1.0, 0.0], [-1.0, 0.0], [0.0, 4.0]]])  # (h=1, K=3, w=2)
    x = torch.tensor([[[0.5, 0.0]], [[0.9, 1.8]], [[-0.2, 0.0]]])  # (N=3, h=1, w=2)
    ref = torch.zeros(3, 1, dtype=torch.long)  # every x measured against code 0's cell
    # code 0 against code 1: the plane x = 0; against code 2: the plane bisecting (1,0) and (0,4)
    normal = torch.tensor([-1.0, 4.0]) / 17**0.5
    to_third = lambda p: float((torch.tensor([0.5, 2.0]) - p) @ normal)  # noqa: E731
    expected = [min(0.5, to_third(torch.tensor([0.5, 0.0]))), min(0.9, to_third(torch.tensor([0.9, 1.8]))), -0.2]
    assert torch.allclose(plane_distance(x, ref, book).squeeze(-1), torch.tensor(expected), atol=1e-6)


def test_edit_hinge_counts_room_in_units_of_an_edits_change_whatever_the_rows_size():
    """Rows early in a window are small and late ones large; the same room, in units of the change
    an edit makes, gets the same hinge at both sizes (the norm unit would not)."""
    book = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])  # cells split by the plane x = 0
    ref = torch.zeros(1, 2, 1, dtype=torch.long)
    unit = torch.tensor([0.1])
    rows = torch.tensor([[[0.05, 0.0], [0.05, 30.0]]])  # both 0.05 from the plane, one 600 times larger
    hinge = edit_hinge(rows, ref, book, unit, margin=2.0).squeeze(-1)
    assert torch.allclose(hinge, torch.tensor([[1.5, 1.5]]), atol=1e-3)  # (float32 distances near 900)
    assert edit_hinge(torch.tensor([[[0.3, 0.0]]]), ref[:, :1], book, unit, margin=2.0).item() == 0.0
    norm = margin_hinge(rows, ref, book, 0.05).squeeze(-1)
    assert norm[0, 0] != norm[0, 1]


def test_the_edit_unit_reaches_every_layer_and_falls_as_rows_leave_boundaries():
    net = tiny_net()
    s_orig, codes, s_edit, where, valid = _locality_inputs(net)
    with torch.no_grad():
        near = locality_loss(net, s_orig, codes, s_edit, where, valid, 3.0, None, "edit")
        only = [locality_loss(net, s_orig, codes, s_edit, where, valid, 3.0, w, "edit") for w in ([1, 0], [0, 1])]
        # every row moved onto its own code, as far inside its cell as it gets; the same edits' changes
        s_moved = [net.layers[i].vq.codebook[torch.arange(2), c].reshape(2, 12, 16) for i, c in enumerate(codes)]
        e_moved = [m + (e - o) for m, e, o in zip(s_moved, s_edit, s_orig)]
        centred = locality_loss(net, s_moved, codes, e_moved, where, valid, 3.0, None, "edit")
    assert near > 0 and only[0] > 0 and only[1] > 0
    assert centred < near


def test_the_edit_unit_counts_each_rows_room_in_edits_where_the_norm_unit_sees_none():
    """Cells split by the plane x0 = 0, the other codes far away; rows 0.5 (first sequence) and 1.0
    (second) inside code 0's cell; the edits move every row 0.25 along x1, which keeps its room.
    In edits, the first sequence's rows have 2 edits of room (hinge 3 - 2 = 1), the second's 4
    (hinge 0). Against the batch's |s|^2 the same margin of 3 means another room: the unit is
    the one asked for."""
    net = tiny_net(heads=1)
    book = torch.zeros(1, 8, 16)
    book[0, 0, 0], book[0, 1, 0] = 1.0, -1.0
    for j in range(2, 8):
        book[0, j, j] = 50.0
    s = torch.zeros(2, 12, 16)
    s[0, :, 0], s[1, :, 0] = 0.5, 1.0
    moved = s.clone()
    moved[..., 1] = 0.25
    codes = torch.zeros(2, 12, 1, dtype=torch.long)
    where, valid = torch.tensor([3, 7]), torch.ones(2, 12, dtype=torch.bool)
    for layer in net.layers:
        layer.vq.codebook.data = book.clone()
    args = ([s, s], [codes, codes], [moved, moved], where, valid, 3.0, None)
    with torch.no_grad():
        edit, norm = locality_loss(net, *args, "edit"), locality_loss(net, *args, "norm")
    # per layer: later rows (8 of the first sequence at hinge 1, 4 of the second at 0) plus all rows
    assert torch.allclose(edit, torch.tensor(8 / 12 + 12 / 24))
    assert not torch.allclose(norm, edit)


def test_edits_replace_exactly_one_non_bos_token():
    ids = torch.arange(40).reshape(4, 10) + 4
    valid = torch.ones_like(ids, dtype=torch.bool)
    valid[0, 5:] = False
    edited, where = make_edits(ids, valid, 1000, torch.Generator().manual_seed(0))
    diff = edited != ids
    assert (diff.sum(1) <= 1).all() and (where >= 1).all() and where[0] < 5
    assert not diff[:, 0].any()


def _locality_inputs(net, seed=0):
    """Per-layer attention sums of two sequences and of edited copies, near the layers' codebooks
    (set to unit-scale codes), with the originals' codes: what distill passes locality_loss."""
    g = torch.Generator().manual_seed(seed)
    s_orig, codes, s_edit = [], [], []
    for layer in net.layers:
        book = layer.vq.codebook
        book.data = torch.randn(book.shape, generator=g)
        s = torch.randn(2, 12, 16, generator=g)
        s_orig.append(s)
        s_edit.append(s + 0.5 * torch.randn(s.shape, generator=g))
        codes.append(distances(s.reshape(-1, 2, 8), book).argmin(-1).reshape(2, 12, 2))
    return s_orig, codes, s_edit, torch.tensor([3, 7]), torch.ones(2, 12, dtype=torch.bool)


def test_layer_weights_set_each_layers_share_of_the_locality_term():
    net = tiny_net()
    s_orig, codes, s_edit, where, valid = _locality_inputs(net)
    margin = 10.0  # every position inside the hinge: each layer's term is positive
    with torch.no_grad():
        equal = locality_loss(net, s_orig, codes, s_edit, where, valid, margin)
        same = locality_loss(net, s_orig, codes, s_edit, where, valid, margin, [3.0, 3.0])
        only = [locality_loss(net, s_orig, codes, s_edit, where, valid, margin, w) for w in ([1, 0], [0, 1])]
        skewed = locality_loss(net, s_orig, codes, s_edit, where, valid, margin, [3.0, 1.0])
    assert torch.allclose(equal, same)  # weights are shares: a common factor changes nothing
    assert only[0] > 0 and only[1] > 0 and not torch.allclose(only[0], only[1])
    assert torch.allclose(equal, (only[0] + only[1]) / 2)  # each alone carries the whole term
    assert torch.allclose(skewed, 0.75 * only[0] + 0.25 * only[1])


def test_layer_weights_must_name_every_layer():
    assert layer_shares(None, 3) == [1.0, 1.0, 1.0]
    for bad in ([1.0, 1.0], [1.0, -1.0, 1.0], [0.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match="one per layer"):
            layer_shares(bad, 3)
