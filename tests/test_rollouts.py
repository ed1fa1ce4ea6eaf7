"""Training's machinery around the trainers, without a model where it can: the batched sampler
against its one-row form, the GRPO batch's dropping of tied groups, MAGRPO's token-normalised
loss and gradient clipping, the validation slice, the prompt filter, the step logs; and on the
real embedded model, rollouts that give the same tokens for the same seeds and weights."""

from __future__ import annotations

import json
import math

import pytest
import torch

from corebench.harness.decoding.precision import cpu_dtype
from corebench.harness.decoding.sampling import RowSampler, nucleus, sample_rows, sorted_nucleus
from corebench.training.grpo import drop_tied
from corebench.training.magrpo import GradNorms, group_loss
from corebench.training.progress import StepClock, StepLog, timing_summary, validation_curve


def test_batched_sampling_draws_what_each_row_draws_alone():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))
    settings = [(3, 1.0, 1.0), (4, 0.7, 1.0), (5, 1.3, 0.9), (3, 1.0, 1.0)]
    batched = sample_rows([RowSampler(*s) for s in settings], logits)
    alone = [RowSampler(*s).sample(row) for s, row in zip(settings, logits, strict=True)]
    assert batched.tolist() == alone
    assert RowSampler(3, 1.0, 1.0).sample(logits[0]) == alone[0]  # same seed, same token
    assert len({RowSampler(seed, 1.0, 1.0).sample(logits[0]) for seed in range(20)}) > 1


@pytest.mark.parametrize("scale", [0.3, 1.0, 4.0, 16.0])  # flat to peaked rows
@pytest.mark.parametrize("top_p", [0.0, 1e-9, 0.5, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("rounded", [False, True])  # bfloat16 logits tie often
def test_the_nucleus_is_the_most_likely_tokens_that_reach_top_p(scale, top_p, rounded):
    """By the definition, in float64: each row keeps its most likely tokens (at least one),
    enough to reach ``top_p`` and no more (without the tokens tied at its least likely score the
    rest falls short), with their scores unchanged; flat rows make the search grow past its
    first 64 candidates."""
    logits = torch.randn(16, 4096, generator=torch.Generator().manual_seed(int(scale * 10))) * scale
    if rounded:
        logits = logits.bfloat16().float()
    kept = nucleus(logits, top_p)
    probs = torch.softmax(logits.double(), dim=-1)
    for row, scores, p in zip(kept, logits, probs, strict=True):
        inside = torch.isfinite(row)
        assert inside.any() and torch.equal(row[inside], scores[inside])
        least = scores[inside].min()
        assert inside.all() or least > scores[~inside].max()  # the most likely, ties and all
        mass, boundary = p[inside].sum(), p[scores == least].sum()
        assert mass >= top_p - 1e-5 and mass - boundary < top_p + 1e-5  # float32 sums
    if scale <= 1.0 and top_p >= 0.5:
        assert int(torch.isfinite(kept).sum(-1).max()) > 64  # the search grew


def test_the_nucleus_search_keeps_what_a_full_sort_keeps():
    """Against the full sort sampling did before, on float32 scores without ties: the same kept
    tokens, except where a row's boundary token has, before it, a mass within rounding of
    ``top_p`` (the normalizing sum adds in another order)."""
    generator = torch.Generator().manual_seed(0)
    rows = same = 0
    for scale in (1.0, 4.0, 16.0):
        logits = torch.randn(32, 49152, generator=generator) * scale
        for top_p in (0.9, 0.95):
            fast, full = nucleus(logits, top_p), sorted_nucleus(logits, top_p)
            probs = torch.softmax(logits.double(), dim=-1)
            for a, b, p in zip(fast, full, probs, strict=True):
                rows += 1
                differ = torch.isfinite(a) != torch.isfinite(b)
                if not differ.any():
                    same += 1
                    continue
                assert int(differ.sum()) == 1  # one boundary token
                before = p[p > p[differ]].sum()  # the mass of the tokens more likely than it
                assert abs(float(before) - top_p) < 5e-5  # float32 sums of 49,152
    assert same >= 0.9 * rows


def test_a_rows_draws_do_not_depend_on_its_batch_or_on_ties():
    """Rows of a realistic vocabulary, bfloat16-rounded (many tied scores), a flat row that
    makes the nucleus search grow for the whole batch, two top_p or one: each row's nucleus and
    draws alone are what they are batched, and a nucleus keeps every token tied at its
    boundary."""
    generator = torch.Generator().manual_seed(3)
    logits = (torch.randn(6, 8192, generator=generator) * 2).bfloat16().float()
    logits[2] = torch.randn(8192, generator=generator).bfloat16().float() * 0.1  # flat
    for top_p in (0.8, 0.95):
        alone = torch.cat([nucleus(row.unsqueeze(0), top_p) for row in logits])
        assert torch.equal(nucleus(logits, top_p), alone)
    for shared in ((0.95, 0.8), (0.95,)):  # two top_p, then one for the whole batch
        settings = [(10 + i, 0.6, shared[i % len(shared)]) for i in range(6)]
        for _ in range(20):  # twenty tokens, the generators advancing as in decoding
            samplers = [RowSampler(*s) for s in settings]
            batched = sample_rows(samplers, logits)
            alone = [RowSampler(*s).sample(r) for s, r in zip(settings, logits, strict=True)]
            assert batched.tolist() == alone
            settings = [(seed + 100, t, p) for seed, t, p in settings]
    row = torch.tensor([[5.0, 3.0, 3.0, 3.0, 1.0, 1.0, 0.0]])  # probabilities .69, .09 x3, ...
    assert torch.isfinite(sorted_nucleus(row, 0.75)).sum() == 2  # one of the three 3.0s
    assert torch.isfinite(nucleus(row, 0.75)).tolist() == [[True] * 4 + [False] * 3]


def test_tied_groups_leave_the_loss_and_its_token_count():
    batch = {
        "advantages": torch.tensor([0.0, 0.0, 1.0, -1.0, 0.0, 0.0]),  # groups of two
        "completion_mask": torch.ones(6, 5, dtype=torch.long),
        "num_items_in_batch": torch.tensor(30),
    }
    assert drop_tied(batch, 2) == 2
    assert batch["completion_mask"].sum(dim=1).tolist() == [0, 0, 5, 5, 0, 0]
    assert int(batch["num_items_in_batch"]) == 10
    untouched = {"advantages": torch.tensor([1.0, -1.0]), "completion_mask": torch.ones(2, 3),
                 "num_items_in_batch": torch.tensor(6)}  # fmt: skip
    assert drop_tied(untouched, 2) == 0 and int(untouched["num_items_in_batch"]) == 6


@pytest.fixture(scope="module")
def tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize(
    ("rows", "head_keeps"), [(None, True), (2, True), (2, False)], ids=["whole", "by-length",
                                                                       "all-logits"]
)  # fmt: skip
def test_group_loss_is_the_token_mean_of_advantage_weighted_log_probabilities(
    tiny_model, monkeypatch, rows, head_keeps
):
    """By hand, one sequence at a time: −Σ_i A_i Σ_t log π(c_it | prompt, c_i<t) / Σ_i T_i (a
    mean over tokens, where comlrl sums each completion's tokens); scored whole (None) or by
    length two rows at a time (the longest two together, the third cut after its one token),
    with the whole batch's gradients; the head on completion positions only, or on every
    position for a model whose forward takes no ``logits_to_keep``."""
    from corebench.harness.decoding import engine

    prompt = torch.tensor([1, 2, 3, 4])
    completions = [torch.tensor([5, 6, 7]), torch.tensor([8]), torch.tensor([9, 10, 11, 12, 2])]
    advantages = torch.tensor([1.0, -0.5, 0.25])
    total, tokens = 0.0, 0
    with torch.no_grad():
        for c, a in zip(completions, advantages, strict=True):
            seq = torch.cat([prompt, c])
            logits = tiny_model(input_ids=seq.unsqueeze(0)).logits[0]
            logps = torch.log_softmax(logits[len(prompt) - 1 : -1].float(), dim=-1)
            total += float(a) * float(logps.gather(-1, c.unsqueeze(-1)).sum())
            tokens += len(c)
    whole = [torch.zeros_like(p) for p in tiny_model.parameters()]
    if rows is not None:  # the whole batch's gradients, to compare with
        group_loss(tiny_model, prompt, completions, advantages).backward()
        whole = [p.grad.clone() for p in tiny_model.parameters()]
        tiny_model.zero_grad()
    monkeypatch.setattr(engine, "accepts_argument", lambda *_: head_keeps)
    calls: list[tuple[tuple[int, ...], int]] = []  # each forward's input shape, head positions

    def record(_, args, kwargs, out):
        calls.append((tuple(kwargs["input_ids"].shape), out.logits.size(1)))

    hook = tiny_model.register_forward_hook(record, with_kwargs=True)
    try:
        loss = group_loss(tiny_model, prompt, completions, advantages, rows)
    finally:
        hook.remove()
    assert float(loss) == pytest.approx(-total / tokens, rel=1e-5)
    # the head on completion positions only (the longest's 5 tokens and the prompt's last), or
    # on every position
    passes = {
        (None, True): [((3, 9), 6)],
        (2, True): [((2, 9), 6), ((1, 5), 2)],
        (2, False): [((2, 9), 9), ((1, 5), 5)],
    }
    assert calls == passes[rows, head_keeps]
    loss.backward()
    assert all(p.grad is not None for p in tiny_model.parameters() if p.requires_grad)
    if rows is not None:
        for param, expected in zip(tiny_model.parameters(), whole, strict=True):
            torch.testing.assert_close(param.grad, expected, rtol=1e-5, atol=1e-7)
    tiny_model.zero_grad()


def test_grad_norms_are_logged_before_clipping_and_clipped(tmp_path, tiny_model):
    optimizer = torch.optim.SGD(tiny_model.parameters(), lr=0.1)
    for p in tiny_model.parameters():
        p.grad = torch.full_like(p, 3.0)
    norms = GradNorms(tmp_path / "grad_norms.txt", 0, max_norm=1.0)
    norms.step = 7
    norms.record(optimizer)
    expected = math.sqrt(sum(9.0 * p.numel() for p in tiny_model.parameters()))
    assert norms.values() == pytest.approx([expected], rel=1e-4)
    after = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in tiny_model.parameters()))
    assert after == pytest.approx(1.0, rel=1e-4)
    assert (tmp_path / "grad_norms.txt").read_text().startswith("7 ")
    tiny_model.zero_grad()


def test_step_logs_keep_only_steps_before_a_resume(tmp_path):
    log = StepLog(tmp_path / "validation.txt")
    for step, value in ((0, 0.1), (5, 0.2), (10, 0.3)):
        log.add(step, value)
    resumed = StepLog(tmp_path / "validation.txt", resume_step=6)
    assert resumed.rows() == [[0.0, 0.1], [5.0, 0.2]]
    assert validation_curve(resumed.rows()) == [{"step": 0, "reward": 0.1},
                                                {"step": 5, "reward": 0.2}]  # fmt: skip
    clock = StepClock(tmp_path / "timing.txt")
    clock.begin()
    clock.add("generation", 2.0)
    clock.add("validation", 100.0)  # left out of the step
    clock.generated([[1, 2, 3], [4]])
    clock.end(1)
    (row,) = clock.log.rows()
    assert row[:3] == [1.0, 2.0, 0.0] and row[3] < 0 and row[4] == 4.0  # total excludes it
    summary = timing_summary([[1, 2.0, 1.0, 5.0, 40], [2, 4.0, 1.0, 7.0, 80]])
    assert summary == {"steps": 2, "generation_s": 3.0, "reward_s": 1.0, "update_s": 2.0,
                       "total_s": 6.0, "tokens_per_s": 20.0}  # fmt: skip


def test_the_validation_slice_is_fixed_whatever_the_seed(data_dir):
    from corebench.training.data import load_train_data
    from corebench.training.settings import load_settings

    common = {"data_dir": str(data_dir), "validation_tasks": 20}
    first = load_train_data(load_settings("grpo", None, seed=0, **common))
    second = load_train_data(load_settings("grpo", None, seed=3, **common))
    ids = [t.task.task_id for t in first.validation]
    assert len(ids) == 20 and ids == [t.task.task_id for t in second.validation]
    assert not set(ids) & {t.task.task_id for t in first.tasks}
    whole = load_train_data(load_settings("grpo", None, data_dir=str(data_dir)))
    assert len(whole.tasks) == len(first.tasks) + 20 and not whole.validation


def test_the_filter_keeps_tasks_solved_sometimes_or_with_differing_scores(
    monkeypatch, data_dir, tmp_path
):
    from corebench.training import curriculum
    from corebench.training.data import load_train_data
    from corebench.training.manifest import write_manifest
    from corebench.training.settings import load_settings

    settings = load_settings("grpo", None, data_dir=str(data_dir), filter_samples=4,
                             filter_tasks=10)  # fmt: skip
    assert settings.filter_keeps == "sometimes_solved"
    data = load_train_data(settings)
    looked = curriculum.examined(data.tasks, 10)
    assert looked == curriculum.examined(data.tasks, 10) and len(looked) == 10
    # each sample's share of tests passed; 1.0 solves the task
    none, half, all_ = [0.0] * 4, [0.5] * 4, [1.0] * 4
    per_task = [none, [1, 0, 0.5, 0], all_, [1, 1, 0, 0], none, [0, 0.3, 0, 0], all_,
                [1, 1, 1, 0.9], half, none]  # fmt: skip
    scores = dict(zip([t.task.task_id for t in looked], per_task, strict=True))
    monkeypatch.setattr(curriculum, "sample_scores", lambda path, tasks, s: scores)
    kept = curriculum.filtered_tasks(tmp_path, data, settings)
    position = {t.task.task_id: i for i, t in enumerate(looked)}
    assert [position[t.task.task_id] for t in kept.tasks] == [1, 3, 7]
    assert kept.filtered == {"examined": 10, "never_solved": 5, "always_solved": 2, "kept": 3}
    # the checkpoint's manifest names the tasks its steps draw from: the filter's three
    written = write_manifest(tmp_path, settings=settings, role="model", base_model="m", data=kept,
                             steps=0, reward_curve=[])  # fmt: skip
    trained = json.loads(written.read_text())["data"]["training_tasks"]
    assert [position[t] for t in trained] == [1, 3, 7]
    # partial credit: also the never-solved task whose samples pass different shares of tests,
    # but not those whose samples all score alike (0.5 each, or none)
    partial = settings.model_copy(update={"filter_keeps": "scores_differ"})
    kept = curriculum.filtered_tasks(tmp_path, data, partial)
    assert [position[t.task.task_id] for t in kept.tasks] == [1, 3, 5, 7]
    assert kept.filtered["kept"] == 4 and kept.filtered["never_solved"] == 5
    monkeypatch.setattr(
        curriculum, "sample_scores", lambda path, tasks, s: dict.fromkeys(scores, half)
    )
    with pytest.raises(Exception, match="solves none of 10 training tasks sometimes but not"):
        curriculum.filtered_tasks(tmp_path, data, settings)
    with pytest.raises(Exception, match="passes different shares of tests on none of 10"):
        curriculum.filtered_tasks(tmp_path, data, partial)
    with pytest.raises(Exception, match="filter_keeps"):
        load_settings("grpo", None, data_dir=str(data_dir), filter_keeps="some")


@pytest.mark.model
def test_the_filter_scores_each_sample_by_its_share_of_tests_passed_and_caches_them(
    monkeypatch, data_dir, tmp_path
):
    """The filter's scores are the sandbox's verdicts on the sampled completions, as shares of
    the tests: the reference scores 1.0, a program that raises 0.0, the reference failing only
    its first call (n - 1) / n of n tests; a second call reads the cache."""
    import re

    from transformers import AutoTokenizer

    from corebench.harness import config as C
    from corebench.harness.decoding import engine
    from corebench.training import curriculum
    from corebench.training.data import load_train_data
    from corebench.training.models import local_checkpoint
    from corebench.training.settings import load_settings

    path = local_checkpoint("embedded")
    monkeypatch.setenv(C.ENV_CACHE_DIR, str(tmp_path))
    settings = load_settings(
        "grpo", None, data_dir=str(data_dir), filter_samples=3, out=str(tmp_path / "run")
    )
    # references that are one function: extraction keeps only the entry point and the helpers
    # EvalPlus's sanitizer keeps (it drops those without a return, such as Mbpp/512's generator)
    tasks = [t for t in load_train_data(settings).tasks
             if t.reference.count("def ") == 1 and t.suite.size > 1][:2]  # fmt: skip
    assert len(tasks) == 2
    tokenizer = AutoTokenizer.from_pretrained(path)
    broken = "def {0}(*args):\n    raise ValueError('no')\n"
    first_fails = (
        "def {0}(*args):\n    {0}.calls = getattr({0}, 'calls', 0) + 1\n"
        "    if {0}.calls == 1:\n        raise ValueError('first')\n"
        "    return _reference(*args)\n"
    )
    programs = [
        [t.reference, broken.format(t.task.entry_point),
         re.sub(rf"def {t.task.entry_point}\s*\(", "def _reference(", t.reference) + "\n"
         + first_fails.format(t.task.entry_point)]
        for t in tasks
    ]  # fmt: skip
    asked: list[list[int]] = []
    decoded_in: list[torch.dtype] = []  # the type of each model the filter decoded with

    class Scripted:  # answers a task's sample j with programs[task][j], as a fenced block
        def __init__(self, model, *args, **kwargs):
            decoded_in.append(model.dtype)

        def complete(self, ids, **kwargs):
            asked.append(kwargs["seeds"])
            k = len(ids) // len(tasks)
            texts = [f"```python\n{programs[i // k][i % k]}```" for i in range(len(ids))]
            return [tokenizer.encode(text) for text in texts]

        def close(self):
            pass

    monkeypatch.setattr(engine, "DecodeEngine", Scripted)
    scores = curriculum.sample_scores(path, tasks, settings)
    assert scores == {t.task.task_id: [1.0, 0.0, (t.suite.size - 1) / t.suite.size] for t in tasks}
    assert all(type(x) is float for row in scores.values() for x in row) and len(asked) == 1
    assert curriculum.sample_scores(path, tasks, settings) == scores and len(asked) == 1
    # another sample count is another sampling (one sample each: the references)
    fewer = settings.model_copy(update={"filter_samples": 1})
    assert list(curriculum.sample_scores(path, tasks, fewer).values()) == [[1.0], [1.0]]
    assert len(asked) == 2
    # the samples decode in the run's rollout_dtype (here the CPU's fastest), and a run decoding
    # in the other type samples again rather than read this type's scores
    assert decoded_in == [getattr(torch, cpu_dtype())] * 2
    other = "bfloat16" if cpu_dtype() == "float32" else "float32"
    elsewhere = settings.model_copy(update={"rollout_dtype": other, "out": str(tmp_path / "b")})
    assert curriculum.sample_scores(path, tasks, elsewhere) == scores
    assert len(asked) == 3 and decoded_in[-1] == getattr(torch, other)


@pytest.mark.model
def test_rollouts_give_the_same_tokens_for_the_same_seeds_and_follow_the_weights():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.training.models import local_checkpoint
    from corebench.training.rollouts import Rollouts, row_seed

    path = local_checkpoint("embedded")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    rollouts = Rollouts(model, tokenizer)
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a Python function that adds two numbers."}],
        add_generation_prompt=True, tokenize=False,
    )  # fmt: skip
    other = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Reverse a list in Python."}],
        add_generation_prompt=True, tokenize=False,
    )  # fmt: skip
    ids, other_ids = (tokenizer(c, add_special_tokens=False)["input_ids"] for c in (chat, other))
    seeds = [row_seed(0, 3, 0, i) for i in range(8)]
    options = {"max_new_tokens": 96, "temperature": 1.0}
    first = rollouts.sample([ids] * 4 + [other_ids] * 4, seeds=seeds, **options)
    again = rollouts.sample([ids] * 4 + [other_ids] * 4, seeds=seeds, **options)
    assert again == first  # the same call: its rows admitted together, batched alike
    assert first[0] != first[1]  # each row its own generator
    reseeded = rollouts.sample([ids] * 4 + [other_ids] * 4, seeds=seeds[::-1], **options)
    assert reseeded != first
    greedy = rollouts.sample([ids], max_new_tokens=16, temperature=0.0)
    with torch.no_grad():  # the policy's weights change: the next rollouts follow them
        for p in model.parameters():
            p.mul_(0.5)
    assert rollouts.sample([ids], max_new_tokens=16, temperature=0.0) != greedy
    rollouts.close()


class SlowQueue:
    """The engine's queue, with a pause after every row put: its thread runs in between."""

    def __init__(self, inner):
        self.inner = inner

    def put(self, item) -> None:
        import time

        self.inner.put(item)
        time.sleep(0.02)

    def get(self, block: bool = True):
        return self.inner.get(block=block)


def tiny_engine(max_batch: int):
    """A decode engine over a two-layer random Llama (shared key/value head, token 39 ends)."""
    from types import SimpleNamespace

    from transformers import LlamaConfig, LlamaForCausalLM

    from corebench.harness.decoding.engine import DecodeEngine

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=39)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    tokenizer = SimpleNamespace(
        eos_token_id=39, pad_token_id=0, decode=lambda ids, **_: " ".join(map(str, ids))
    )
    return DecodeEngine(model, tokenizer, "cpu", max_batch)


PROMPTS = [[1, 2, 3], [4, 5], [1, 2, 3], [6, 7, 8, 9], [4, 5], [10]]
SAMPLED = {"max_new_tokens": 12, "temperature": 1.0, "seeds": list(range(6))}


def start_engine_thread(engine) -> None:
    """Start the engine's own thread with a request queued as ``submit`` queues it (tokens,
    not a chat), and wait for it: from then on its thread runs the loop and blocking calls hand
    their rows to it."""
    import threading

    from corebench.harness.decoding.engine import Slot
    from corebench.harness.records import GenerationRequest

    done = threading.Event()
    request = GenerationRequest(messages=[], max_new_tokens=2)
    engine._enqueue([Slot(request, lambda _: done.set(), [1, 2], None)])
    assert done.wait(60) and engine._thread.is_alive()


def test_a_blocking_call_decodes_in_its_own_thread_with_the_tokens_the_engines_thread_gives():
    """``complete`` with no loop running drives the loop in the caller's thread (torch's
    OpenMP team there is the one that computed before; a second thread's makes GNU OpenMP stop
    spinning); while the engine's thread runs, the same call goes through it, batched alike and
    with the same tokens."""
    import threading

    engine = tiny_engine(32)
    threads: set[str] = set()
    engine.model.register_forward_pre_hook(lambda *_: threads.add(threading.current_thread().name))
    inline = engine.complete(PROMPTS, **SAMPLED)
    assert threads == {threading.current_thread().name} and engine._thread is None
    start_engine_thread(engine)
    threads.clear()
    assert engine.complete(PROMPTS, **SAMPLED) == inline
    assert threads == {"decode"}
    engine.close()
    assert not engine._thread.is_alive()


def test_a_blocking_call_decodes_without_its_callers_autocast():
    """Autocast is per thread: a trainer's (MAGRPO's ``bf16``) must not reach the rollouts
    its thread now decodes."""
    engine = tiny_engine(32)
    dtypes: set[torch.dtype] = set()
    engine.model.model.layers[0].mlp.down_proj.register_forward_hook(
        lambda _module, _inputs, output: dtypes.add(output.dtype)
    )
    plain = engine.complete(PROMPTS, **SAMPLED)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert engine.complete(PROMPTS, **SAMPLED) == plain
    assert dtypes == {torch.float32}
    assert engine._thread is None  # decoded in this thread, under its autocast


def test_an_interrupted_blocking_call_leaves_nothing_behind():
    """An interrupt inside the model reaches the caller who drives the loop (not its rows'
    results); its rows still queued are dropped, and the next call decodes as if nothing had
    happened."""
    engine = tiny_engine(4)  # 4 of the 6 rows in flight, 2 queued
    expected = engine.complete(PROMPTS, **SAMPLED)
    steps = {"left": 3}

    def interrupt(*_):
        steps["left"] -= 1
        if steps["left"] == 0:
            raise KeyboardInterrupt

    hook = engine.model.register_forward_pre_hook(interrupt)
    with pytest.raises(KeyboardInterrupt):
        engine.complete(PROMPTS, **SAMPLED)
    hook.remove()
    assert engine._rows == [] and engine._waiting.qsize() == 2  # both settled: skipped
    admitted = engine.stats.first_tokens
    assert engine.complete(PROMPTS, **SAMPLED) == expected
    assert engine.stats.first_tokens - admitted == len(PROMPTS)  # none of the settled two
    assert engine._waiting.qsize() == 0


def test_a_calls_rows_are_admitted_together_however_slowly_they_are_queued():
    """The engine's thread may wake while a call is still queueing its rows: it admits none of
    them before all are queued, so a call is batched alike every time (and, with fewer slots
    than rows, the first rows fill every slot at once)."""
    for max_batch in (32, 4):
        engine = tiny_engine(max_batch)
        start_engine_thread(engine)  # blocking calls now queue their rows for its thread
        engine._waiting = SlowQueue(engine._waiting)
        prefilled: list[int] = []
        prefill = engine._prefill

        def recorded(new, sizes=prefilled, prefill=prefill):
            sizes.append(len(new))
            return prefill(new)

        engine._prefill = recorded
        first = engine.complete(PROMPTS, **SAMPLED)
        assert prefilled[0] == min(max_batch, len(PROMPTS)), prefilled
        before = list(prefilled)
        prefilled.clear()  # the engine's thread now waits on the queue: the race is open
        assert engine.complete(PROMPTS, **SAMPLED) == first
        assert prefilled == before
        engine.close()


def staggered(engine, rows: list[tuple[list[int], int, int]]) -> list[list[int]]:
    """Each row's sampled tokens, every row run to its own cap (no end token): ``rows`` are
    (prompt ids, max new tokens, seed), queued as one call."""
    import threading

    from corebench.harness.decoding.engine import Slot
    from corebench.harness.records import GenerationRequest

    engine.eos_ids = set()
    done = threading.Semaphore(0)
    slots = []
    for ids, cap, seed in rows:
        request = GenerationRequest(messages=[], max_new_tokens=cap, temperature=1.0, seed=seed)
        slots.append(Slot(request, lambda _: done.release(), ids, engine._sampler(request)))
    engine._serve(slots)
    for _ in slots:
        done.acquire()
    return [slot.tokens for slot in slots]


def test_a_prompt_queued_after_its_first_row_joins_without_a_forward_pass():
    """A row's samples of one task are queued one after another and admitted as slots free,
    apart: a prompt computed for its first row is kept while rows are in flight, and the later
    rows take its keys, values and next-token scores. Every row decodes what it decodes alone,
    and what computing its prompt again gives."""
    from corebench.harness.decoding import engine as engine_module

    # three slots; the first row runs long, so the batch never empties; rows leave from the
    # middle of the batch (the last row moves into their places) and the later ones join apart
    rows = [([6, 7, 8, 9], 30, 0), ([1, 2, 3], 4, 1), ([4, 5], 12, 2), ([1, 2, 3], 5, 3),
            ([1, 2, 3], 3, 4), ([4, 5], 4, 5)]  # fmt: skip
    kept = tiny_engine(3)
    tokens = staggered(kept, rows)
    assert [len(t) for t in tokens] == [cap for _, cap, _ in rows]
    assert kept.stats.prefill_tokens == 4 + 3 + 2  # each prompt once
    assert kept.stats.reused_prompts == 3 and kept.stats.first_tokens == 6
    assert [staggered(tiny_engine(3), [row])[0] for row in rows] == tokens  # each alone
    engine_module.PROMPT_BYTES, limit = 0, engine_module.PROMPT_BYTES
    try:
        computed = tiny_engine(3)  # keeps nothing: every admission computes its prompts
    finally:
        engine_module.PROMPT_BYTES = limit
    assert staggered(computed, rows) == tokens
    assert computed.stats.prefill_tokens == 4 + 3 + 2 + 3 + 3 + 2
    assert computed.stats.reused_prompts == 0


def test_kept_prompts_are_computed_again_when_weights_change_beside_rows_in_flight():
    """The engine's thread may serve another caller's row while a trainer changes weights
    between its own calls: the batch never empties, and a prompt kept under the old weights is
    computed again under the new ones."""
    import threading

    from corebench.harness.decoding.engine import Slot
    from corebench.harness.records import GenerationRequest

    engine = tiny_engine(4)
    engine.eos_ids = set()
    other_done = threading.Event()
    long = GenerationRequest(messages=[], max_new_tokens=20_000)
    engine._enqueue([Slot(long, lambda _: other_done.set(), [6, 7], None)])  # its thread runs
    greedy = {"max_new_tokens": 4, "temperature": 0.0}
    try:
        engine.complete([[1, 2, 3]], **greedy)
        computed = engine.stats.prefill_tokens
        engine.complete([[1, 2, 3]], **greedy)
        assert engine.stats.prefill_tokens == computed  # kept across calls: rows in flight
        with torch.no_grad():
            for p in engine.model.parameters():
                p.mul_(-1.5)
        engine.complete([[1, 2, 3]], **greedy)
        assert engine.stats.prefill_tokens == computed + 3
        assert not other_done.is_set()  # the other row was in flight throughout
    finally:
        engine.close()
    assert other_done.wait(10)


def test_kept_prompts_go_when_the_batch_empties_so_new_weights_compute_them_again():
    """Weights change only between calls (a trainer updates while no row is in flight): the
    store empties with the batch, and the next call computes its prompts under the new weights."""
    engine = tiny_engine(2)
    greedy = {"max_new_tokens": 8, "temperature": 0.0}
    first = engine.complete([[1, 2, 3]], **greedy)
    assert len(engine._prompts) == 0 and engine.stats.prefill_tokens == 3
    with torch.no_grad():
        for p in engine.model.parameters():
            p.mul_(-1.5)
    after = engine.complete([[1, 2, 3]], **greedy)
    assert engine.stats.prefill_tokens == 6 and after != first
    fresh = tiny_engine(2)  # the changed weights, never decoded before
    fresh.model.load_state_dict(engine.model.state_dict())
    assert fresh.complete([[1, 2, 3]], **greedy) == after


def test_the_prompt_store_keeps_the_most_recently_used_within_its_bytes():
    from corebench.harness.decoding.engine import Prefilled, PromptStore

    def prompt(length: int) -> Prefilled:  # one layer, 4 bytes a value
        return Prefilled([(torch.zeros(1, 1, length, 2), torch.zeros(1, 1, length, 2))],
                         torch.zeros(3))  # fmt: skip

    assert prompt(5).nbytes == (2 * 5 * 2 + 3) * 4
    store = PromptStore(limit=prompt(5).nbytes * 3)
    for ids in [(1,), (2,), (3,)]:
        store.put(ids, prompt(5))
    assert store.get((1,)) is not None  # now the most recently used
    store.put((4,), prompt(5))  # over the limit: the least recently used, (2,), goes
    assert store.get((2,)) is None and all(store.get(i) for i in [(1,), (3,), (4,)])
    assert store.nbytes == 3 * prompt(5).nbytes
    store.put((5,), prompt(20))  # larger than the whole store: not kept, nothing dropped
    assert store.get((5,)) is None and len(store) == 3
    store.clear()
    assert len(store) == 0 and store.nbytes == 0


def test_the_prefill_asks_for_the_last_positions_scores_only():
    engine = tiny_engine(2)
    shapes: list[tuple[int, ...]] = []
    engine.model.lm_head.register_forward_hook(lambda _m, _i, out: shapes.append(out.shape))
    engine.complete([[1, 2, 3], [4, 5, 6, 7]], max_new_tokens=1)
    assert shapes == [(2, 1, 40)]  # not (2, 4, 40): one position a prompt


def test_rows_that_stay_past_the_new_size_refill_the_places_of_rows_that_left():
    from corebench.harness.decoding.engine import refill

    assert refill([False, True, False, True, False]) == ([0, 4, 2], [1], [4])
    assert refill([True, True, False, False]) == ([2, 3], [0, 1], [2, 3])
    assert refill([False, False, True]) == ([0, 1], [], [])


def test_the_slot_cache_holds_what_rebuilding_the_batch_would(monkeypatch):
    """Rows join (each side left-padded), decode and leave in random order, with little spare
    room (the buffer is reallocated often): after every change a layer's keys and values are
    exactly the batch rebuilt the plain way (rows left-padded with zeros, in the engine's
    order, columns no row needs dropped), and the buffer is kept exactly when what it holds
    fits, else reallocated for at most about twice the rows in use."""
    from corebench.harness.decoding import engine as engine_module
    from corebench.harness.decoding.engine import SlotLayer, _left_pad, refill

    monkeypatch.setattr(engine_module, "ROOM", 3)
    generator = torch.Generator().manual_seed(0)

    def joining(rows: int, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lengths = [width] + torch.randint(1, width + 1, (rows - 1,), generator=generator).tolist()
        mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths])
        pad = mask[:, None, :, None]
        keys, values = (torch.randn(rows, 2, width, 3, generator=generator) * pad for _ in "kv")
        return keys, values, mask

    keys, values, mask = joining(3, 5)
    layer = SlotLayer(keys, values)
    reallocations = 0
    for _ in range(300):
        buffer = layer._keys.data_ptr()
        held, _, columns, _ = layer._keys.shape
        choice = torch.randint(0, 3, (1,), generator=generator).item()
        if choice == 0 and len(mask) < 8:  # rows join
            new = joining(int(torch.randint(1, 4, (1,), generator=generator)),
                          int(torch.randint(1, 9, (1,), generator=generator)))  # fmt: skip
            grow = max(0, new[2].shape[1] - mask.shape[1])
            fits = len(mask) + len(new[2]) <= held and grow <= layer.start
            width = max(mask.shape[1], new[2].shape[1])
            keys, values, mask = (
                torch.cat([_left_pad(old, width), _left_pad(added, width)])
                for old, added in zip((keys, values, mask), new, strict=True)
            )
            layer.admit(new[0], new[1])
        elif choice == 1 or len(mask) < 2:  # a decode step
            fits = layer.end < columns
            column = [torch.randn(len(mask), 2, 1, 3, generator=generator) for _ in "kv"]
            keys, values = (
                torch.cat([old, c], dim=2) for old, c in zip((keys, values), column, strict=True)
            )
            mask = torch.cat([mask, mask.new_ones(len(mask), 1)], dim=1)
            layer.update(*column)
        else:  # some rows leave, not all
            fits = True
            leaving = (torch.rand(len(mask), generator=generator) < 0.4).tolist()
            leaving[int(torch.randint(0, len(mask), (1,), generator=generator))] = False
            order, holes, movers = refill(leaving)
            keys, values, mask = keys[order], values[order], mask[order]
            first = int((mask.sum(0) > 0).nonzero()[0])
            keys, values, mask = keys[:, :, first:], values[:, :, first:], mask[:, first:]
            layer.retire(torch.tensor(holes, dtype=torch.long),
                         torch.tensor(movers, dtype=torch.long), len(order), first)  # fmt: skip
        assert torch.equal(layer.keys, keys) and torch.equal(layer.values, values)
        assert (layer._keys.data_ptr() == buffer) == fits  # in place exactly when it fits
        if not fits:  # reallocated: a batch fallen to half the rows held, or fewer, shrinks
            reallocations += 1
            assert len(mask) <= layer._keys.shape[0] <= 2 * len(mask) + 1
    assert reallocations > 10


def test_the_validation_copy_keeps_an_update_the_rollouts_copy_rounds_off():
    """``Rollouts(dtype="float32")`` (validation) holds the policy's weights exactly after a
    refresh; a bfloat16 copy (rollouts, where the CPU computes bfloat16 natively) holds them
    rounded, so an update smaller than half a bfloat16 grid step leaves most of it unchanged."""
    import copy
    from types import SimpleNamespace

    from transformers import LlamaConfig, LlamaForCausalLM

    from corebench.training.rollouts import Rollouts

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=39)  # fmt: skip
    policy = LlamaForCausalLM(config).eval()
    tokenizer = SimpleNamespace(
        eos_token_id=39, pad_token_id=0, decode=lambda ids, **_: " ".join(map(str, ids))
    )
    start = copy.deepcopy(policy)
    validation = Rollouts(policy, tokenizer, dtype="float32")
    rollouts = Rollouts(policy, tokenizer, dtype="bfloat16")
    with torch.no_grad():  # an update of 1/1000 of each weight: under bfloat16's 1/256 step
        for p in policy.parameters():
            p.mul_(1.001)
    greedy = {"max_new_tokens": 4, "temperature": 0.0}
    validation.sample([[1, 2, 3]], **greedy)  # a sample refreshes the copy first
    rollouts.sample([[1, 2, 3]], **greedy)
    after, before = dict(policy.named_parameters()), dict(start.named_parameters())
    kept = moved = total = 0
    for name, copied in validation.shadow.named_parameters():
        assert copied.dtype == torch.float32 and torch.equal(copied, after[name]), name
    for name, copied in rollouts.shadow.named_parameters():
        assert copied.dtype == torch.bfloat16
        assert torch.equal(copied, after[name].to(torch.bfloat16)), name
        kept += int((copied == before[name].to(torch.bfloat16)).sum())
        moved += int((after[name] != before[name]).sum())
        total += copied.numel()
    assert moved > 0.99 * total  # every (nonzero) weight moved in float32 ...
    assert kept > 0.5 * total  # ... and most of them did not in bfloat16
    validation.close()
    rollouts.close()


def test_rollouts_of_a_lora_policy_decode_its_merged_weights_and_leave_it_unmerged():
    """A policy training LoRA adapters: the rollouts' copy is a plain model holding what merging
    the adapters would give (so it follows their updates), and the policy itself stays unmerged."""
    import copy
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from corebench.training.rollouts import Rollouts, is_lora

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=39)  # fmt: skip
    plain = LlamaForCausalLM(config).eval()
    policy = get_peft_model(
        copy.deepcopy(plain), LoraConfig(r=2, lora_alpha=4, target_modules="all-linear")
    )
    assert is_lora(policy) and not is_lora(plain)
    tokenizer = SimpleNamespace(
        eos_token_id=39, pad_token_id=0, decode=lambda ids, **_: " ".join(map(str, ids))
    )
    rollouts = Rollouts(policy, tokenizer, dtype="float32")
    assert not is_lora(rollouts.shadow)
    assert {n for n, _ in rollouts.shadow.named_parameters()} == {
        n for n, _ in plain.named_parameters()
    }
    with torch.no_grad():  # an update: adapters start as a zero update (B = 0); make them not
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    greedy = {"max_new_tokens": 6, "temperature": 0.0}
    decoded = rollouts.sample([[1, 2, 3], [4, 5]], **greedy)
    merged = copy.deepcopy(policy).merge_and_unload()  # PEFT's own merge, for comparison
    expected = dict(merged.named_parameters())
    changed = 0
    for name, copied in rollouts.shadow.named_parameters():
        assert torch.allclose(copied, expected[name], rtol=0, atol=1e-6), name
        changed += int(not torch.equal(copied, dict(plain.named_parameters())[name]))
    assert changed == 14  # every adapted projection (7 per layer, 2 layers) moved, nothing else
    # the policy's base weights are untouched (not merged in place)
    for name, parameter in policy.get_base_model().named_parameters():
        if ".base_layer." in name:
            original = dict(plain.named_parameters())[name.replace(".base_layer.", ".")]
            assert torch.equal(parameter, original), name
    reference = Rollouts(merged, tokenizer, dtype="float32")
    assert reference.sample([[1, 2, 3], [4, 5]], **greedy) == decoded
    rollouts.close()
    reference.close()


def test_a_lora_policy_is_saved_as_a_plain_checkpoint_with_its_trained_adapters_merged(tmp_path):
    """``save_merged``: the start's weights plus the trained adapters, as PEFT's own merge of the
    policy gives them, in a plain checkpoint (no adapter names)."""
    import copy
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from corebench.training.grpo import save_merged

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    start = LlamaForCausalLM(config)
    start.save_pretrained(tmp_path / "start")
    policy = get_peft_model(
        copy.deepcopy(start), LoraConfig(r=2, lora_alpha=4, target_modules="all-linear")
    )
    with torch.no_grad():  # trained adapters: a nonzero update
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    trainer = SimpleNamespace(save_model=lambda path: policy.save_pretrained(path))
    save_merged(trainer, tmp_path / "start", tmp_path / "adapters", tmp_path / "model")
    saved = load_file(tmp_path / "model" / "model.safetensors")
    expected = copy.deepcopy(policy).merge_and_unload().state_dict()
    original = start.state_dict()
    assert saved.keys() == load_file(tmp_path / "start" / "model.safetensors").keys()
    moved = 0
    for name, weight in saved.items():
        assert torch.allclose(weight, expected[name], rtol=0, atol=1e-6), name
        moved += int(not torch.equal(weight, original[name]))
    assert moved == 14  # every adapted projection (7 per layer, 2 layers), nothing else
