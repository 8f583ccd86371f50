"""notebooks/campaign.ipynb under papermill: a whole campaign against the fake Messages API."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, load_script  # noqa: E402
from harness import KEY, config, dollars, events  # noqa: E402

pytest.importorskip("papermill")
from kernelseek import campaign  # noqa: E402


def test_campaign_notebook_records_a_campaign(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeAPI(load_script("reach_goal"), key=KEY, by_turn=True) as api:
        root = campaign.run(config(api.base_url, arm="bank"), tmp_path / "campaigns", "nb-bank-r0")
    nb = json.loads((root / "notebooks" / "campaign.ipynb").read_text())
    out = "".join(o.get("text", "") if isinstance(o.get("text"), str) else "".join(o.get("text", []))
                  for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))
    # the dollars are the server's reported usage (tokens from the request bytes) at the test prices
    assert f"nb-bank-r0: goal met (goal met); 3 evaluations, best geomean 1.155x; steps 7, ${dollars(api):.2f}" in out
    params = next(c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    assert "arm = \"bank\"" in "".join(params["source"]) and "budget_steps = 30" in "".join(params["source"])
    row = campaign.outcome(root)
    assert row["met"] and row["arm"] == "bank" and row["evaluations"] == 3 and row["questions"] >= 1
    assert events(root, "start")[0]["config"]["arm"] == "bank"
    assert KEY not in (root / "trace.jsonl").read_text()
    assert KEY not in (root / "notebooks" / "campaign.ipynb").read_text()


def test_an_api_error_echoing_the_key_never_reaches_the_executed_notebook(tmp_path, monkeypatch):
    """The key is redacted inside the notebook's kernel, before papermill writes any output: the raw
    executed copy (not passed through campaign.run's final scrub) holds it in no form."""
    import base64

    import papermill as pm
    from kernelseek.agent import create
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    echo = {"status": 400, "error": "invalid x-api-key {key} / " + base64.b64encode(KEY.encode()).decode()}
    with FakeAPI([echo, echo], key=KEY) as api:
        cfg = config(api.base_url).absolute()
        root = create(cfg, tmp_path / "c").root
        out = tmp_path / "executed.ipynb"
        with pytest.raises(pm.PapermillExecutionError) as err:
            pm.execute_notebook(str(campaign.NOTEBOOK), str(out), parameters=campaign.parameters(cfg, root),
                                progress_bar=False, cwd=str(campaign.REPO))
    raw = out.read_text()
    assert "CampaignCrash" in raw and "[redacted:ANTHROPIC_API_KEY]" in raw
    assert KEY not in raw and base64.b64encode(KEY.encode()).decode()[4:-4] not in raw
    assert KEY not in err.value.evalue and KEY not in (root / "trace.jsonl").read_text()
