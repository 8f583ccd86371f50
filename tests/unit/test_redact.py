"""Secrets: the API key in no trace, log, error or stderr, in the forms a text could carry it (as is,
reversed, hex, base64 at any alignment and wrapped, URL-safe base64), also when the API itself
echoes it in an error (a scripted server on 127.0.0.1 that does exactly that)."""
import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, tool, turn  # noqa: E402
from harness import KEY, events, make, trace_text  # noqa: E402

from kernelseek.cli import main  # noqa: E402
from kernelseek.agent import CampaignCrash, run_campaign  # noqa: E402
from kernelseek.redact import Redactor, forms, scrub_notebook  # noqa: E402
from kernelseek.traces import TraceWriter  # noqa: E402


def encodings(secret: str) -> dict:
    raw = secret.encode()
    wrapped = subprocess.run(["base64"], input=b"some text around it, long enough to wrap: " + raw,
                             capture_output=True).stdout.decode()
    return {"plain": f"key={secret};", "reversed": secret[::-1], "hex": raw.hex(), "HEX": raw.hex().upper(),
            "b64": base64.b64encode(raw).decode(), "b64+1": base64.b64encode(b"x" + raw).decode(),
            "b64+2": base64.b64encode(b"xy" + raw + b"\n").decode(), "b64 wrapped": wrapped,
            "urlsafe": base64.urlsafe_b64encode(b"?" + raw).decode(),
            "b64 of reversed": base64.b64encode(secret[::-1].encode()).decode()}


def test_every_encoding_is_redacted_and_the_rest_kept(tmp_path):
    red = Redactor({"ANTHROPIC_API_KEY": KEY})
    for name, s in encodings(KEY).items():
        out = red.text("before " + s + " after")
        assert "[redacted:ANTHROPIC_API_KEY]" in out and out.startswith("before ") and out.endswith(" after"), name
        for f in forms(KEY):
            assert f not in out.replace("\n", ""), (name, f)
    assert red.text("nothing secret here") == "nothing secret here"
    w = TraceWriter(tmp_path / "t.jsonl", redactor=red)
    w.write("message", content=[{"type": "text", "text": s} for s in encodings(KEY).values()])
    text = (tmp_path / "t.jsonl").read_text()
    assert text.count("[redacted:ANTHROPIC_API_KEY]") == len(encodings(KEY)) and KEY not in text


def test_an_api_error_that_echoes_the_key_leaves_no_trace_of_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    logged = []
    echo = {"status": 400, "error": "invalid x-api-key {key} (base64: " + base64.b64encode(KEY.encode()).decode() + ")"}
    with FakeAPI([turn(tool("shell", command="echo hi")), echo, echo], key=KEY) as api:
        root = make(tmp_path, api.base_url)
        with pytest.raises(CampaignCrash) as err:
            run_campaign(root, log=lambda *a: logged.append(" ".join(map(str, a))))
        assert KEY in str(api.headers[-1])                   # the client sends it, and only the client
        assert main(["campaign", "resume", str(root)]) == 2    # `campaign resume`: the same echo, on stderr
    e = err.value
    chain = [e, e.__cause__]
    assert all(KEY not in str(x) and KEY not in repr(x.args) for x in chain)
    assert "[redacted:ANTHROPIC_API_KEY]" in str(e)
    assert "invalid x-api-key [redacted:ANTHROPIC_API_KEY]" in events(root, "error")[0]["message"]
    stderr = capsys.readouterr().err
    assert "kernelseek campaign resume: the API call failed" in stderr and KEY not in stderr
    b64 = base64.b64encode(KEY.encode()).decode()
    for text in [trace_text(root), stderr, *logged]:
        assert KEY not in text and b64[4:-4] not in text


def test_scrub_notebook_redacts_outputs_split_over_lines(tmp_path):
    wrapped = base64.encodebytes(KEY.encode() * 2).decode().splitlines(keepends=True)
    nb = {"cells": [{"cell_type": "code", "source": ["print(1)"], "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["ok\n", *wrapped]},
        {"output_type": "error", "ename": "E", "evalue": f"bad key {KEY}", "traceback": [f"E: {KEY}"]}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(nb))
    assert scrub_notebook(p, Redactor({"ANTHROPIC_API_KEY": KEY}))
    out = p.read_text()
    assert KEY not in out and "".join(wrapped).replace("\n", "")[8:40] not in out.replace("\\n", "")
    assert json.loads(out)["cells"][0]["outputs"][0]["text"][0] == "ok\n"
