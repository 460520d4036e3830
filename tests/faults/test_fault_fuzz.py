"""Fuzzing in CI: every decoder target of ``tools/fuzz.py`` on hypothesis-driven mutations of
valid encodings and on raw bytes.  Any input must decode or raise an ``mqstore.errors``
subclass.  ``MQSTORE_FUZZ_EXAMPLES`` raises the bound; ``python tools/fuzz.py --minutes N``
runs longer."""

from __future__ import annotations

import random

import pytest
from faults_support import env_int, load_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.errors import MqStoreError

fuzz = load_tool("fuzz")
TARGETS = fuzz.targets()
EXAMPLES = env_int("MQSTORE_FUZZ_EXAMPLES", 80)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_decode(name: str) -> None:
    """The seeds themselves are valid: the targets exercise the success path too."""
    t = TARGETS[name]
    results = [fuzz.run_one(t, s) for s in t.seeds]
    assert "ok" in results, results


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutated_inputs_decode_or_raise_typed_errors(name: str) -> None:
    t = TARGETS[name]

    @SETTINGS
    @given(rnd=st.randoms(use_true_random=False), which=st.integers(0, 100))
    def run(rnd: random.Random, which: int) -> None:
        data = fuzz.mutate(rnd, t.seeds[which % len(t.seeds)], t.fix)
        assert fuzz.run_one(t, data) in ("ok", "typed")

    run()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_raw_bytes_decode_or_raise_typed_errors(name: str) -> None:
    t = TARGETS[name]

    @settings(SETTINGS, max_examples=max(EXAMPLES // 3, 10))
    @given(data=st.binary(max_size=512))
    def run(data: bytes) -> None:
        assert fuzz.run_one(t, data) in ("ok", "typed")

    run()


def test_run_one_lets_untyped_errors_through() -> None:
    """The harness is not vacuous: a decoder bug (an untyped exception) fails the run."""
    def bad(data: bytes) -> None:
        if data:
            raise IndexError("boom")
        raise MqStoreError("typed")

    t = fuzz.Target("bad", bad, (b"x",))
    assert fuzz.run_one(t, b"") == "typed"
    with pytest.raises(IndexError):
        fuzz.run_one(t, b"x")
