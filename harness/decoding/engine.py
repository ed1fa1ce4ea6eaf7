"""Continuous batching for a transformers causal LM: one decode loop, slots refilled as they free.

``model.generate`` decodes a static batch until its longest member ends, so a batch of 16 lasts
as long as its longest answer while most rows have long finished. Here one thread runs one decode
loop over the requests in flight:

- a request waiting for a slot is prefilled (its prompt in one forward pass) as soon as a slot is
  free, and its key/value cache joins the running batch, left-padded to the batch's length (the
  padding is masked out, positions count real tokens only, as with ``generate``'s left padding);
- a prompt's keys, values and next-token scores are kept (``PromptStore``), so the other samples
  of a task, queued after it, join without a forward pass of their own; a kept prompt is only
  reused under the weights that computed it: the store empties when the weights' fingerprint
  (each parameter's storage and in-place version) changes, and whenever the batch empties;
- every step feeds each row its last token, and its key/value cache grows in place (a buffer with
  room to spare along the sequence: ``DynamicCache`` copies the whole cache every step, 1.2-1.3x
  slower at batch 16-32 on a 2-core CPU); a row that ends (end of sequence, its own token cap, a
  stop string, or its request's ``stop_pattern``) leaves the batch at once, its slot free for
  the next request, and the cache columns no row needs any more are dropped. Joining and
  leaving copy only the rows concerned (``SlotLayer``): the batch's last rows move into the
  places of rows that left, new rows are written after them, and the buffer is reallocated
  only when it lacks room (rebuilding the whole cache at each made a sampled row 1.22x slower);
- at temperature > 0 each request samples from its own generator (``sampling.py``), so its draws
  do not depend on what else was in flight (the logits they draw from may, in their last bits:
  products round with the batch's shape); a call's requests (``run``, ``complete``)
  are queued together, so the same call batches alike every time;
- on the CPU, a decode step's attention multiplies each query head group with its shared
  key/value head (``attention.py``) instead of copying the cache per query head;
- a blocking call (``complete``, ``run``) made while no loop is running drives the loop itself,
  in the caller's thread, until its rows are done; ``submit`` (the backends' path) hands rows
  to a thread of the engine's own, which from then on serves every call until ``close``, as it
  does a blocking call made while another caller drives the loop. Torch's OpenMP
  workers belong to the thread that starts a parallel region: a second computing thread's team
  makes more managed threads than cores, and GNU OpenMP then stops spinning its workers between
  regions and wakes them by system call, hundreds of times a decode step. A trainer computes on
  its own thread, so its rollouts decode there: 16 rollouts of at most 256 tokens of the
  embedded model in float32 on 2 cores, 21.9 s from the thread that loaded it against 27.7 s
  from a second thread (13 voluntary context switches against 167,910; the same tokens;
  ``measurements/grpo_step_split.py --threads``).
"""

from __future__ import annotations

import ctypes
import inspect
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from corebench.harness.backend import cut_at_stop
from corebench.harness.decoding.attention import use_decode_attention
from corebench.harness.decoding.sampling import RowSampler, sample_rows
from corebench.harness.records import Generation, GenerationRequest

Deliver = Callable[[Generation | BaseException], None]
ROOM = 256  # sequence positions a cache buffer keeps spare (it doubles when full)
# decode steps between returning freed heap memory to the system. Prefills, and cache buffers
# outgrown, leave freed blocks that glibc keeps, fragmented, in the decoding thread's arena and
# never gives back: when every retire reallocated the cache, 1,836 rollouts (a prompt filter's)
# grew a process by 13 GB, while malloc_trim(0) brought 100 rollouts' 3.0 GB back to 1.0.
TRIM_EVERY = 64


# bytes of prompt keys and values the engine keeps for reuse: about 50 prompts of 100 tokens of the
# embedded model in float32 (46 KiB a token), 4,700 tokens of Qwen2.5-Coder-7B in bfloat16
PROMPT_BYTES = 256 * 2**20


def _malloc_trim() -> Callable[[], None]:
    """glibc's ``malloc_trim(0)`` (every arena's free memory back to the system), or nothing."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0) and None


release_memory = _malloc_trim()


class SlotLayer(DynamicLayer):
    """One layer's keys and values for the running batch, in a buffer reused in place: rows
    ``[0, rows)`` of it, columns ``[start, end)``, every row's last position at ``end - 1`` and
    zeros left of its first. A decode step writes column ``end``; rows join by writing their
    own rows, leave by having the batch's last rows copied into theirs, and columns no row
    needs any more are dropped by moving ``start``. The buffer is reallocated (with ``ROOM``
    spare columns) only when it lacks rows or columns."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        super().__init__()
        _, heads, _, dim = keys.shape
        self._keys = keys.new_zeros(0, heads, 0, dim)
        self._values = values.new_zeros(0, heads, 0, dim)
        self.rows = self.start = self.end = 0
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self._view()
        self.admit(keys, values)

    def _view(self) -> None:
        self.keys = self._keys[: self.rows, :, self.start : self.end]
        self.values = self._values[: self.rows, :, self.start : self.end]

    def _room(self, rows: int, left: int, right: int) -> None:
        """Make the buffer hold ``rows`` rows, ``left`` columns before ``start`` and ``right``
        after ``end``, copying what it holds into a new one where it does not."""
        held, heads, columns, dim = self._keys.shape
        if rows <= held and left <= self.start and self.end + right <= columns:
            return
        width = self.end - self.start
        rows = rows if rows <= held // 2 else max(rows, held)  # a batch past its peak shrinks
        shape = (rows, heads, left + width + max(right, ROOM, width), dim)
        keys, values = self._keys.new_zeros(shape), self._values.new_zeros(shape)
        keys[: self.rows, :, left : left + width] = self.keys
        values[: self.rows, :, left : left + width] = self.values
        self._keys, self._values = keys, values
        self.start, self.end = left, left + width

    def admit(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Rows joining the batch: ``[new, heads, width, dim]``, left-padded to one width. The
        shorter side is padded with zeros, as ``_left_pad`` pads the mask."""
        new, width = keys.shape[0], keys.shape[2]
        grow = max(0, width - (self.end - self.start))
        self._room(self.rows + new, grow, 0)
        if grow:  # the running rows' new columns on the left: padding
            self._keys[: self.rows, :, self.start - grow : self.start] = 0
            self._values[: self.rows, :, self.start - grow : self.start] = 0
            self.start -= grow
        joined = slice(self.rows, self.rows + new)
        self._keys[joined, :, self.start : self.end - width] = 0
        self._values[joined, :, self.start : self.end - width] = 0
        self._keys[joined, :, self.end - width : self.end] = keys
        self._values[joined, :, self.end - width : self.end] = values
        self.rows += new
        self._view()

    def retire(self, holes: torch.Tensor, movers: torch.Tensor, rows: int, drop: int) -> None:
        """Keep ``rows`` rows: the rows ``movers`` (from the end of the batch) copied into
        ``holes`` (rows that left), and the first ``drop`` columns dropped."""
        if len(holes):
            window = slice(self.start, self.end)
            self._keys[holes, :, window] = self._keys[movers, :, window]
            self._values[holes, :, window] = self._values[movers, :, window]
        self.rows, self.start = rows, self.start + drop
        self._view()

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ):
        added = key_states.shape[-2]
        self._room(self.rows, 0, added)
        self._keys[: self.rows, :, self.end : self.end + added] = key_states
        self._values[: self.rows, :, self.end : self.end + added] = value_states
        self.end += added
        self._view()
        return self.keys, self.values


def refill(leaving: list[bool]) -> tuple[list[int], list[int], list[int]]:
    """Where the rows that stay go when the rows marked ``leaving`` leave: the batch's rows
    that stay beyond its new size (``movers``) take the places of those that left within it
    (``holes``), the rest stay where they are. Returns the new batch as old row numbers
    (``order``), ``holes`` and ``movers``."""
    size = leaving.count(False)
    holes = [i for i in range(size) if leaving[i]]
    movers = [i for i in range(size, len(leaving)) if not leaving[i]]
    order = list(range(size))
    for hole, mover in zip(holes, movers, strict=True):
        order[hole] = mover
    return order, holes, movers


def slot_cache(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> DynamicCache:
    """A cache of ``SlotLayer``s holding ``pairs`` (keys, values) per layer."""
    cache = DynamicCache()
    cache.layers = [SlotLayer(k, v) for k, v in pairs]
    return cache


def pairs_of(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


@dataclass
class Prefilled:
    """One prompt's keys and values (``[1, heads, length, dim]`` per layer, no padding) and the
    scores of its next token."""

    pairs: list[tuple[torch.Tensor, torch.Tensor]]
    logits: torch.Tensor

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.pairs) + self.logits.nbytes


class PromptStore:
    """Prefilled prompts by token ids, least recently used dropped first, at most ``limit``
    bytes in all (a prompt larger than that is not kept)."""

    def __init__(self, limit: int | None = None):
        self.limit, self.nbytes = PROMPT_BYTES if limit is None else limit, 0
        self._kept: OrderedDict[tuple[int, ...], Prefilled] = OrderedDict()

    def get(self, ids: tuple[int, ...]) -> Prefilled | None:
        found = self._kept.get(ids)
        if found is not None:
            self._kept.move_to_end(ids)
        return found

    def put(self, ids: tuple[int, ...], prefilled: Prefilled) -> None:
        if ids in self._kept or prefilled.nbytes > self.limit:
            return
        self._kept[ids] = prefilled
        self.nbytes += prefilled.nbytes
        while self.nbytes > self.limit:
            self.nbytes -= self._kept.popitem(last=False)[1].nbytes

    def clear(self) -> None:
        self._kept.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._kept)


@dataclass
class Slot:
    """One request in flight."""

    request: GenerationRequest
    deliver: Deliver
    prompt_ids: list[int]
    sampler: RowSampler | None
    started: float = field(default_factory=time.perf_counter)
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: str | None = None
    peak_batch: int = 1
    delivered: bool = False

    def settle(self, result: Generation | BaseException) -> None:
        """Hand the result over, once."""
        if not self.delivered:
            self.delivered = True
            self.deliver(result)


@dataclass
class EngineStats:
    """What the loop did: forward steps, row-steps computed, and tokens that were kept."""

    steps: int = 0
    row_steps: int = 0
    first_tokens: int = 0  # tokens chosen from a prefill's logits
    prefill_tokens: int = 0  # prompt tokens a forward pass computed
    reused_prompts: int = 0  # rows whose prompt was not computed again (kept, or shared in a pass)
    completion_tokens: int = 0
    busy_s: float = 0.0


class DecodeEngine:
    """Runs requests through ``model`` with continuous batching, at most ``max_batch`` at once."""

    def __init__(self, model: Any, tokenizer: Any, device: str, max_batch: int):
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.max_batch = max(1, max_batch)
        self._device_type = torch.device(device).type
        if device == "cpu":
            use_decode_attention(model)
        eos = model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.eos_token_id}
        self.eos_ids.discard(None)
        self.stats = EngineStats()
        self._prompts = PromptStore()
        self._prompts_weights: tuple[tuple[int, int], ...] = ()
        # the output head's scores for the last prompt position only, where the model can, as
        # ``generate`` asks for them (the other positions' are never used; in float32 the
        # one-row product rounds slightly otherwise than that row of the whole prompt's)
        self._last_logits = accepts_argument(model, "logits_to_keep")
        self._waiting: queue.SimpleQueue[Slot | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._driver = threading.Lock()  # held by whichever thread runs the loop
        # the running batch
        self._rows: list[Slot] = []
        self._cache = DynamicCache()
        self._reset()

    # --- submitting ------------------------------------------------------------------------------
    def submit(self, request: GenerationRequest, deliver: Deliver) -> None:
        """Queue ``request`` for the engine's thread; ``deliver`` is called with its result from
        the thread that runs the loop."""
        self._enqueue([self._slot(request, deliver)])

    def _slot(self, request: GenerationRequest, deliver: Deliver) -> Slot:
        tok = self.tokenizer
        text = tok.apply_chat_template(
            [m.model_dump() for m in request.messages], add_generation_prompt=True, tokenize=False
        )
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return Slot(request, deliver, ids, self._sampler(request))

    def _sampler(self, request: GenerationRequest) -> RowSampler | None:
        if request.temperature <= 0:
            return None
        return RowSampler(request.seed or 0, request.temperature, request.top_p, self.device)

    def _enqueue(self, slots: list[Slot], start: bool = True) -> None:
        """Queue ``slots`` as one: the loop admits none of them before all are queued (under the
        lock), so that a call's rows are batched alike every time it is made while no other
        caller's rows are in flight. ``start``: make sure the engine's thread runs."""
        with self._lock:
            for slot in slots:
                self._waiting.put(slot)
            if start and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._loop, name="decode", daemon=True)
                self._thread.start()

    def _serve(self, slots: list[Slot]) -> None:
        """Run ``slots`` to the end: in the caller's thread when no loop is running (it drives
        the loop until they are delivered, decoding beside them any rows other threads queue
        meanwhile, which the engine's thread, started by their call, carries on), else through
        the engine's thread, which once started serves every call until ``close``."""
        if not self._driver.acquire(blocking=False):
            self._enqueue(slots)
            return
        try:
            self._enqueue(slots, start=False)
            while not all(slot.delivered for slot in slots) and self._turn(block=False):
                pass
            for slot in slots:  # left queued when the engine was closed meanwhile
                slot.settle(RuntimeError("the model was closed"))
            if not self._rows:
                release_memory()
        except BaseException as exc:  # an interrupt: the batch is dropped, as on a failure
            for slot in [*self._rows, *slots]:
                slot.settle(exc)
            self._reset()
            raise
        finally:
            self._driver.release()

    def complete(
        self,
        prompt_ids: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seeds: list[int] | None = None,
    ) -> list[list[int]]:
        """The completion token ids of tokenized prompts (blocking; each row ends with its end
        of sequence token when it stopped there): rollouts for a trainer. Row i samples from a
        generator seeded with ``seeds[i]``, and a call's rows are queued together, so the same
        call (prompts, seeds, weights) gives the same tokens every time when no other caller's
        rows are in flight. Beside other rows a
        prompt's rows may diverge after some tokens: the batch's shape changes how matrix
        products round (``measurements/grpo_step_split.py`` says where)."""
        done = threading.Semaphore(0)
        failures: list[BaseException] = []

        def deliver(result: Generation | BaseException) -> None:
            if isinstance(result, BaseException):
                failures.append(result)
            done.release()

        slots = []
        for index, ids in enumerate(prompt_ids):
            request = GenerationRequest(
                messages=[], max_new_tokens=max_new_tokens, temperature=temperature,
                top_p=top_p, seed=seeds[index] if seeds else 0,
            )  # fmt: skip
            slots.append(Slot(request, deliver, list(ids), self._sampler(request)))
        self._serve(slots)
        for _ in slots:
            done.acquire()
        if failures:
            raise failures[0]
        return [slot.tokens for slot in slots]

    def run(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Every request to the end, in order (blocking)."""
        results: list[Generation | BaseException | None] = [None] * len(requests)
        done = threading.Semaphore(0)

        def deliver_to(index: int) -> Deliver:
            def deliver(result: Generation | BaseException) -> None:
                results[index] = result
                done.release()

            return deliver

        self._serve([self._slot(r, deliver_to(i)) for i, r in enumerate(requests)])
        for _ in requests:
            done.acquire()
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results  # type: ignore[return-value]

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            with self._lock:  # never inside another caller's rows
                self._waiting.put(None)
            self._thread.join()

    # --- the loop --------------------------------------------------------------------------------
    def _loop(self) -> None:
        """The engine's thread: it runs the loop (once no caller drives it) until closed."""
        with self._driver:
            while self._turn(block=not self._rows):
                pass

    def _turn(self, block: bool) -> bool:
        """Admit waiting rows, then one decode step; False once the engine was closed."""
        if self._admit(block=block) is None:
            return False
        if not self._rows:
            release_memory()  # idle: give the freed cache buffers back
            return True
        self._guarded(self._step, [])
        if self.stats.steps % TRIM_EVERY == 0:
            release_memory()
        return True

    def _guarded(self, work: Callable[[], None], new: list[Slot]) -> None:
        """Run ``work`` without autocast (the driving thread's may be on: a trainer's); if it
        fails, every request in flight (and ``new``) gets the error, and an interrupt (not an
        ``Exception``) goes on up to a caller driving the loop (the engine's thread keeps
        serving the other callers)."""
        started = time.perf_counter()
        try:
            with torch.inference_mode(), torch.autocast(self._device_type, enabled=False):
                work()
        except BaseException as exc:  # noqa: BLE001 - delivered to the requests, not lost
            for slot in [*self._rows, *new]:
                slot.settle(exc)
            self._reset()
            if not isinstance(exc, Exception) and threading.current_thread() is not self._thread:
                raise  # an interrupt, to the caller driving the loop
        finally:
            self.stats.busy_s += time.perf_counter() - started

    def _admit(self, block: bool) -> bool | None:
        """Prefill waiting requests into free slots; None when the engine was closed."""
        new: list[Slot] = []
        try:
            while len(self._rows) + len(new) < self.max_batch:
                try:
                    slot = self._waiting.get(block=block and not new)
                except queue.Empty:
                    break
                if slot is None:
                    for waiting in [*self._rows, *new]:
                        waiting.settle(RuntimeError("the model was closed"))
                    self._reset()
                    if threading.current_thread() is not self._thread:
                        with self._lock:  # a caller drove the loop: the close is its thread's
                            self._waiting.put(None)
                    return None
                if slot.delivered:  # its caller was interrupted while it waited
                    continue
                new.append(slot)
                if len(new) == 1:
                    with self._lock:  # the rest of its call's rows are queued by now
                        pass
        except BaseException as exc:  # an interrupt while taking rows: they get it
            for slot in new:
                slot.settle(exc)
            raise
        if new:
            self._guarded(lambda: self._prefill(new), new)
        return True

    def _prefill(self, new: list[Slot]) -> None:
        """Bring the new rows' prompts into the batch: each prompt not kept from earlier is
        computed once, in one forward pass (a trainer's group repeats one prompt for all its
        completions; a row's samples follow one another), and every row sharing a prompt gets
        its keys and values and its next-token scores."""
        weights = self._weights()
        if weights != self._prompts_weights:  # the weights changed since the store was filled
            self._prompts.clear()
            self._prompts_weights = weights
        prompts = [tuple(s.prompt_ids) for s in new]
        kept = {p: self._prompts.get(p) for p in dict.fromkeys(prompts)}
        missing = [p for p, found in kept.items() if found is None]
        if missing:
            kept.update(self._forward(missing))
        self.stats.reused_prompts += len(new) - len(missing)
        self.stats.first_tokens += len(new)
        width = max(len(p) for p in prompts)
        rows = [kept[p] for p in prompts]
        cache = [
            (
                torch.cat([_left_pad(row.pairs[layer][0], width) for row in rows]),
                torch.cat([_left_pad(row.pairs[layer][1], width) for row in rows]),
            )
            for layer in range(len(rows[0].pairs))
        ]
        self._merge(new, cache, self._left_mask(prompts, width))
        self._choose(torch.stack([row.logits for row in rows]), len(self._rows) - len(new))
        self._retire()

    def _left_mask(self, prompts: list[tuple[int, ...]], width: int) -> torch.Tensor:
        """The attention mask of ``prompts`` left-padded to ``width``."""
        return torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device
        )

    def _weights(self) -> tuple[tuple[int, int], ...]:
        """The weights' fingerprint: each parameter's storage and in-place version. In-place
        operations on the parameter bump the version (``copy_``, ``load_state_dict``, an
        unfused optimizer's step), ``.data =`` replaces the storage; writes through ``.data``
        and fused optimizers change neither, which the emptying of the store with the batch
        covers for a caller that changes weights between its calls (corebench's rollouts
        refresh their copy with ``copy_``). Weights made in inference mode have no version."""
        return tuple(
            (p.data_ptr(), -1 if p.is_inference() else p._version) for p in self.model.parameters()
        )

    def _forward(self, prompts: list[tuple[int, ...]]) -> dict[tuple[int, ...], Prefilled]:
        """One forward pass over ``prompts`` (left-padded): each one's keys, values and
        next-token scores, also kept in the store for rows that come later."""
        width = max(len(p) for p in prompts)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.tensor(
            [[pad] * (width - len(p)) + list(p) for p in prompts], device=self.device
        )
        mask = self._left_mask(prompts, width)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        last = {"logits_to_keep": 1} if self._last_logits else {}
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **last
        )
        self.stats.prefill_tokens += int(mask.sum())
        pairs, logits = pairs_of(out.past_key_values), out.logits[:, -1, :]
        computed = {}
        for i, prompt in enumerate(prompts):
            start = width - len(prompt)  # its own positions, padding cut off (cloned, not a
            computed[prompt] = Prefilled(  # view holding the whole pass)
                [
                    (k[i : i + 1, :, start:].clone(), v[i : i + 1, :, start:].clone())
                    for k, v in pairs
                ],
                logits[i].clone(),
            )
            self._prompts.put(prompt, computed[prompt])
        return computed

    def _step(self) -> None:
        rows = len(self._rows)
        self._mask = torch.cat([self._mask, self._mask.new_ones(rows, 1)], dim=1)
        positions = self._mask.sum(-1, keepdim=True) - 1
        out = self.model(
            input_ids=self._next.view(rows, 1),
            attention_mask=self._mask,
            position_ids=positions,
            past_key_values=self._cache,
            use_cache=True,
        )
        self.stats.steps += 1
        self.stats.row_steps += rows
        self._choose(out.logits[:, -1, :], 0)
        self._retire()

    # --- rows ------------------------------------------------------------------------------------
    def _merge(
        self, new: list[Slot], cache: list[tuple[torch.Tensor, torch.Tensor]], mask: torch.Tensor
    ) -> None:
        """Append prefilled rows to the running batch, left-padding the shorter side."""
        for slot in new:
            slot.peak_batch = len(self._rows) + len(new)
        if not self._rows:
            self._rows, self._cache, self._mask = list(new), slot_cache(cache), mask
            self._next = torch.zeros(len(new), dtype=torch.long, device=self.device)
            return
        width = max(self._mask.shape[1], mask.shape[1])
        for layer, (keys, values) in zip(self._cache.layers, cache, strict=True):
            layer.admit(keys, values)
        self._mask = torch.cat([_left_pad(self._mask, width), _left_pad(mask, width)])
        self._next = torch.cat([self._next, self._next.new_zeros(len(new))])
        self._rows.extend(new)
        for slot in self._rows:
            slot.peak_batch = max(slot.peak_batch, len(self._rows))

    def _choose(self, logits: torch.Tensor, first: int) -> None:
        """The next token of the rows from ``first`` on, one per row of ``logits`` (greedy, or
        the row's own sampler)."""
        chosen = logits.argmax(dim=-1)
        slots = self._rows[first : first + len(chosen)]
        sampled = [i for i, slot in enumerate(slots) if slot.sampler is not None]
        if sampled:
            index = torch.tensor(sampled, device=logits.device)
            drawn = sample_rows([slots[i].sampler for i in sampled], logits[index])
            chosen[index] = drawn.to(chosen.dtype)
        for offset, token in enumerate(chosen.tolist()):
            self._next[first + offset] = token
            self._advance(slots[offset], token)

    def _advance(self, slot: Slot, token: int) -> None:
        request = slot.request
        slot.tokens.append(token)
        self.stats.completion_tokens += 1
        if token in self.eos_ids:
            slot.finish = "stop"
            return
        if request.stop or request.stop_pattern:  # decoded every step only where a stop is asked
            slot.text, stopped = cut_at_stop(
                self.tokenizer.decode(slot.tokens, skip_special_tokens=True), request
            )
            if stopped:
                slot.finish = "stop"
                return
        if len(slot.tokens) >= request.max_new_tokens:
            slot.finish = "length"

    def _retire(self) -> None:
        """Deliver finished rows and drop them (and cache columns nobody needs) from the batch."""
        keep = [i for i, slot in enumerate(self._rows) if slot.finish is None]
        if len(keep) == len(self._rows):
            return
        now = time.perf_counter()
        for slot in self._rows:
            if slot.finish is not None:
                request = slot.request
                if not (request.stop or request.stop_pattern):
                    slot.text = self.tokenizer.decode(slot.tokens, skip_special_tokens=True)
                slot.settle(
                    Generation(
                        text=slot.text,
                        prompt_tokens=len(slot.prompt_ids),
                        completion_tokens=len(slot.tokens),
                        finish_reason=slot.finish,  # type: ignore[arg-type]
                        latency_s=now - slot.started,
                        batch_size=slot.peak_batch,
                    )
                )
        if not keep:
            self._reset()
            return
        order, holes, movers = refill([slot.finish is not None for slot in self._rows])
        index = torch.tensor(order, device=self.device)
        self._rows = [self._rows[i] for i in order]
        self._mask, self._next = self._mask[index], self._next[index]
        first = int((self._mask.sum(0) > 0).nonzero()[0])  # columns before it are padding for all
        self._mask = self._mask[:, first:]
        holes_at = torch.tensor(holes, dtype=torch.long, device=self.device)
        movers_at = torch.tensor(movers, dtype=torch.long, device=self.device)
        for layer in self._cache.layers:
            layer.retire(holes_at, movers_at, len(keep), first)

    def _reset(self) -> None:
        """An empty batch. Kept prompts go too (their memory back while the engine idles)."""
        self._prompts.clear()
        self._rows, self._cache = [], DynamicCache()
        self._mask = torch.zeros(0, 0, dtype=torch.long, device=self.device)
        self._next = torch.zeros(0, dtype=torch.long, device=self.device)


def accepts_argument(model: Any, argument: str) -> bool:
    """Whether ``model``'s forward takes ``argument``."""
    try:
        return argument in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _left_pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """``tensor`` zero-padded on the left of its sequence axis (dim 1 of a mask, dim 2 of k/v)."""
    axis = 1 if tensor.dim() == 2 else 2
    missing = width - tensor.shape[axis]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[axis] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=axis)
