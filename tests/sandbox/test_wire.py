"""The one wire format of the harness's child processes: typed messages as JSON lines (in-process and over pipes)."""

from __future__ import annotations

import os
import threading

import pytest

from cuda_agent.harness import messages as m
from cuda_agent.harness import reference_messages as rm
from cuda_agent.harness.wire import (MAX_LINE_BYTES, Failure, LineReader, WireError, decode_reply, decode_request,
                                     encode, write_all)


def test_requests_round_trip_with_their_op_and_types() -> None:
    req = rm.MakeSet(set=3, seed=12345, exchange="/x", transport="host", stage=False)
    line = encode(req)
    assert line.endswith(b"\n") and line.startswith(b'{"op":"make_set"')
    back = decode_request(line, rm.REFERENCE_REQUESTS)
    assert back == req and type(back) is rm.MakeSet
    call = decode_request(encode(m.Call(set=1, audit=True)), m.RUNNER_REQUESTS)
    assert call == m.Call(set=1, audit=True, flush=True)


def test_both_processes_speak_the_same_format_and_the_tables_do_not_overlap() -> None:
    assert set(rm.REFERENCE_REQUESTS).isdisjoint(m.RUNNER_REQUESTS)
    for table in (rm.REFERENCE_REQUESTS, m.RUNNER_REQUESTS):
        for op, cls in table.items():
            assert cls.op == op and cls.__doc__, op  # every message says what it is for


def test_a_bad_request_is_refused_with_what_is_valid() -> None:
    with pytest.raises(WireError, match=r"unknown op 'pickle'; valid: \["):
        decode_request(b'{"op": "pickle", "args": []}', rm.REFERENCE_REQUESTS)
    with pytest.raises(WireError, match="make_set"):
        decode_request(b'{"op": "make_set", "set": "zero", "seed": 1, "exchange": null}', rm.REFERENCE_REQUESTS)
    with pytest.raises(WireError, match="not JSON"):
        decode_request(b"\x80\x04\x95", rm.REFERENCE_REQUESTS)  # a pickle is not a message
    with pytest.raises(WireError, match="JSON object"):
        decode_request(b"[1, 2]", rm.REFERENCE_REQUESTS)


def test_replies_are_validated_against_the_request_that_asked() -> None:
    ok = decode_reply(encode(m.Guarded(violations=[m.Violation(rule="T8.runtime.timer_patched", message="x")])),
                      m.Guard.Reply)
    assert isinstance(ok, m.Guarded) and ok.violations[0].rule == "T8.runtime.timer_patched"
    failed = decode_reply(encode(Failure(error="boom", fd_error=True)), m.Inputs.Reply)
    assert isinstance(failed, Failure) and failed.fd_error and failed.error == "boom"
    with pytest.raises(WireError, match="does not fit"):  # a forged field
        decode_reply(b'{"ok": true, "ms": 0.001, "verdict": "correct"}', m.Call.Reply)
    with pytest.raises(WireError, match="does not fit"):  # a missing one
        decode_reply(b'{"ok": true}', m.Call.Reply)


def test_lines_cross_a_pipe_in_parts_and_a_flood_is_refused() -> None:
    r, w = os.pipe()
    reader = LineReader(r)
    big = rm.Samples(ms=[0.001 * i for i in range(20_000)])  # a long line: more than one pipe buffer
    writer = threading.Thread(target=lambda: (write_all(w, encode(big)), write_all(w, encode(rm.Stopping()))))
    writer.start()
    assert decode_reply(reader.read_line(30), rm.TimeBaseline.Reply) == big
    assert decode_reply(reader.read_line(30), rm.Stop.Reply) == rm.Stopping()
    writer.join(30)
    assert reader.read_line(0.05) is None  # nothing more: the deadline passes
    def flood_it() -> None:
        try:
            write_all(w, b"x" * (MAX_LINE_BYTES + 1))
        except OSError:  # the reader gave up and closed its end
            pass
        finally:
            os.close(w)

    flood = threading.Thread(target=flood_it, daemon=True)
    flood.start()
    with pytest.raises(WireError, match="without a newline"):
        reader.read_line(60)
    os.close(r)
    flood.join(30)


def test_the_end_of_the_stream_is_eof() -> None:
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(EOFError):
        LineReader(r).read_line(5)
    os.close(r)
