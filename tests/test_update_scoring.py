"""A GRPO update's completions scored a few rows of like length at a time (``by_length``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from corebench.training.update_scoring import by_length, labelled_tokens_only  # noqa: E402


@pytest.fixture
def model():
    """A small rotary model with TRL's fused output head, as GRPOTrainer prepares its policy."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    model = LlamaForCausalLM(config).float()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    return model


def trl_score(model, calls: list[tuple[int, int]]):
    """What TRL's ``_get_per_token_logps_and_entropies`` does with a batch (labels on the
    completion tokens, the fused head), recording each call's rows and columns."""

    def score(ids, mask, keep):
        calls.append(tuple(ids.shape))
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-keep] = -100
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        return out.log_probs[:, -keep:], out.entropy[:, -keep:], None

    return score


def batch(prompts: list[int], completions: list[int]):
    """TRL's update batch: prompts padded on the left, completions on the right."""
    generator = torch.Generator().manual_seed(1)
    width, keep = max(prompts), max(completions)
    ids = torch.randint(1, 40, (len(prompts), width + keep), generator=generator)
    columns = torch.arange(width + keep)
    starts = torch.tensor([width - p for p in prompts])[:, None]
    ends = torch.tensor([width + c for c in completions])[:, None]
    mask = ((columns >= starts) & (columns < ends)).long()
    return ids.masked_fill(mask == 0, 0), mask, keep


def test_rows_of_like_length_score_as_the_whole_padded_batch(model):
    """Each row's log-probabilities, entropies and the gradients they give are the whole
    batch's, while the groups compute fewer positions."""
    prompts = [5, 9, 5, 9, 5, 9, 5, 9]
    completions = [1, 12, 3, 7, 12, 2, 9, 4]
    ids, mask, keep = batch(prompts, completions)
    used = mask[:, -keep:].bool()
    results = []
    for way in ("whole", "by length"):
        model.zero_grad()
        calls: list[tuple[int, int]] = []
        score = trl_score(model, calls)
        logps, entropy, _ = (
            score(ids, mask, keep) if way == "whole" else by_length(score, ids, mask, keep, rows=3)
        )
        assert logps.shape == entropy.shape == (8, keep)
        (logps[used].sum() + entropy[used].sum()).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        results.append((logps.detach(), entropy.detach(), grads, calls))
    (whole, whole_entropy, whole_grads, whole_calls), (grouped, entropy, grads, calls) = results
    torch.testing.assert_close(grouped[used], whole[used], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy[used], whole_entropy[used], atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, whole_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert [rows for rows, _ in calls] == [3, 3, 2]
    assert sum(r * c for r, c in calls) < whole_calls[0][0] * whole_calls[0][1]


def test_a_group_of_empty_completions_keeps_one_column(model):
    """Rows whose completions hold no token still give a row of the batch's width, and the
    others their values."""
    ids, mask, keep = batch([4, 6, 4], [5, 0, 0])
    calls: list[tuple[int, int]] = []
    logps, _, _ = by_length(trl_score(model, calls), ids, mask, keep, rows=2)
    assert logps.shape == (3, keep)
    assert bool((logps[1:] == 0).all())
    # sorted by where they end: rows 0 and 1 (6 prompt and 5 completion columns), then row 2
    # alone, with no completion token: its prompt and one completion column
    assert calls == [(2, 11), (1, 7)]
    whole = trl_score(model, [])(ids, mask, keep)[0]
    torch.testing.assert_close(logps[0], whole[0], atol=1e-5, rtol=1e-5)


def test_the_output_head_scores_only_labelled_tokens_on_the_cpu(model, monkeypatch):
    """TRL's fused head projects every position on a CPU (tile shapes fixed for compilers);
    within ``labelled_tokens_only`` only the completion tokens, and the same values."""
    from trl.trainer import utils

    scored: list[int] = []
    apply = utils._ChunkedLogProbFunction.apply

    def counting(hidden, *args):
        scored.append(hidden.shape[0])
        return apply(hidden, *args)

    monkeypatch.setattr(utils._ChunkedLogProbFunction, "apply", counting)
    ids, mask, keep = batch([5, 9], [3, 6])
    plain = trl_score(model, [])(ids, mask, keep)[0]
    with labelled_tokens_only():
        labelled = trl_score(model, [])(ids, mask, keep)[0]
    assert scored == [2 * (ids.shape[1] - 1), 3 + 6]
    used = mask[:, -keep:].bool()
    torch.testing.assert_close(labelled[used], plain[used])
    assert not utils._use_triton(torch.device("cpu"))  # put back afterwards


WHOLE = [(8, 8)]  # TRL's own call: every row, every column
BY_FOUR = [(4, 3 + 5), (4, 3 + 3)]  # groups of 4, each cut after the last column its rows use


@pytest.mark.parametrize(
    ("rows", "extra", "kwargs", "aux_enabled", "expected"),
    [
        (4, (), {"batch_size": 8, "compute_entropy": True}, False, BY_FOUR),
        (4, (), {"batch_size": 2}, False, [(2, 8), (2, 7), (2, 6), (2, 5)]),  # TRL's smaller
        (4, (), {"pixel_values": None, "token_type_ids": None}, False, BY_FOUR),  # a text model's
        (None, (), {}, False, WHOLE),  # update_scoring = "trl", or not on a CPU
        (4, (), {"compute_aux_loss": True}, False, WHOLE),
        (4, (), {}, True, WHOLE),  # a mixture of experts' router loss
        (4, (), {"pixel_values": torch.zeros(8, 3)}, False, WHOLE),  # images
        (4, (), {"token_type_ids": torch.zeros(8, 8, dtype=torch.long)}, False, WHOLE),
        (4, (8,), {}, False, WHOLE),  # a positional argument (corebench passes none)
    ],
)
def test_the_trainer_scores_by_length_only_what_by_length_covers(
    monkeypatch, rows, extra, kwargs, aux_enabled, expected
):
    """``CorebenchGRPOTrainer``'s override hands TRL the whole batch wherever by_length would
    not give TRL's values: no rows set, an auxiliary loss, a model with images or token types,
    or a positional argument; by length, each group's call asks for entropies as the step did,
    and TRL's ``batch_size`` caps a group's rows."""
    from trl import GRPOTrainer

    from corebench.training.grpo import trainer_class

    calls: list[tuple[int, ...]] = []
    passed: list[dict] = []

    def trl_own(self, model, ids, mask, keep, *args, **kw):
        calls.append(tuple(ids.shape))
        passed.append(kw)
        return torch.zeros(ids.shape[0], keep), None, None

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", trl_own)
    trainer = object.__new__(trainer_class())  # the override alone: no model or data needed
    trainer.update_rows, trainer.aux_loss_enabled = rows, aux_enabled
    ids, mask, keep = batch([3, 3, 3, 3, 3, 3, 3, 3], [5, 2, 4, 1, 5, 3, 2, 4])
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        None, ids, mask, keep, *extra, **kwargs
    )
    assert logps.shape == (8, keep)
    assert calls == expected
    if expected is WHOLE:
        assert passed == [kwargs]
    else:
        entropy = {k: v for k, v in kwargs.items() if k == "compute_entropy"}
        assert passed == [entropy] * len(expected)
