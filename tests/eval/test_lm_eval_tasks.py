"""lm-evaluation-harness task YAMLs as a source (eval/lm_eval_tasks.py): a local YAML task run by lm-eval itself
through `yunshan eval --tasks lmeval:NAME --include-path DIR` scores as yunshan's own mc task on the same rows and
prompt; a YAML path works too; its documents are checked by decontamination."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install -e '.[dev]')")

ROWS = [
    {"id": "a", "question": "企业的资产负债表反映的是", "choices": ["财务状况", "经营成果", "现金流量", "利润分配"], "answer": 0},
    {"id": "b", "question": "下列属于货币政策工具的是", "choices": ["税收", "公开市场操作", "财政补贴", "国债发行"], "answer": 1},
    {"id": "c", "question": "通货膨胀时，央行通常会", "choices": ["降低利率", "增加货币供应", "提高利率", "减少税收"], "answer": 2},
    {"id": "d", "question": "审计报告的意见类型不包括", "choices": ["无保留意见", "保留意见", "否定意见", "建议意见"], "answer": 3},
]

# The prompt of yunshan's mc task with its defaults ("{question}\nA. ...\n答案：", the letter right after it).
MC_YAML = """task: bank_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}\\nA. {{{{choices[0]}}}}\\nB. {{{{choices[1]}}}}\\nC. {{{{choices[2]}}}}\\nD. {{{{choices[3]}}}}\\n答案："
doc_to_choice: ["A", "B", "C", "D"]
doc_to_target: answer
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

QA_YAML = """task: bank_qa
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}\\n答案："
doc_to_target: "{{{{choices[answer]}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 4
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


@pytest.fixture
def lm_eval_tasks(tmp_path) -> tuple[Path, Path]:
    data = tmp_path / "data" / "test.jsonl"
    data.parent.mkdir()
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "bank_mc.yaml").write_text(MC_YAML.format(data=data), encoding="utf-8")
    qa = tmp_path / "elsewhere" / "bank_qa.yaml"
    qa.parent.mkdir()
    qa.write_text(QA_YAML.format(data=data), encoding="utf-8")
    return tasks, qa


def test_a_local_yaml_task_runs_through_lm_eval_and_agrees_with_the_mc_task(tmp_path, llama_dir, lm_eval_tasks):
    from yunshan.io.artifacts import EvalResults
    from yunshan.cli import main

    tasks, qa = lm_eval_tasks
    data = tmp_path / "data" / "test.jsonl"
    out = tmp_path / "run"
    assert main(["eval", "--model", str(llama_dir), "--tasks", "lmeval:bank_mc", f"lmeval:{qa}", f"mc={data}",
                 "--include-path", str(tasks), "--batch-size", "2", "--out", str(out), "--no-progress"]) == 0
    results = EvalResults.read(out / "results.json")
    name = next(iter(results.models))
    lm = results.tasks["lmeval:bank_mc"].results[name]
    ours = results.tasks["mc"].results[name]
    assert lm["format"] == "lmeval" and lm["rows"]["bank_mc"]["acc"] * 100 == pytest.approx(ours["overall"])
    samples = sorted(lm["predictions"]["bank_mc"], key=lambda s: s["doc_id"])
    for sample, pred in zip(samples, ours["predictions"], strict=True):
        assert [r[0] for r in sample["filtered_resps"]] == pytest.approx(pred["logliks"], abs=1e-4)
        assert sample["acc"] == float(pred["correct"])
    files = results.tasks["lmeval:bank_mc"].files
    assert any(f.endswith("bank_mc.yaml") for f in files) and any(f.endswith("test.jsonl") for f in files)
    gen = results.tasks[f"lmeval:{qa}"].results[name]
    assert set(gen["rows"]) == {"bank_qa"} and 0 <= gen["overall"] <= 1 and gen["metric"] == "exact_match"
    assert [s["target"] for s in sorted(gen["predictions"]["bank_qa"], key=lambda s: s["doc_id"])] == [
        r["choices"][r["answer"]] for r in ROWS]
    metrics = [m.key for m in results.tasks["lmeval:bank_mc"].metrics[name]]
    assert metrics == ["lmeval:bank_mc/bank_mc/acc"]
    md = (out / "results.md").read_text(encoding="utf-8")
    assert "## lmeval:bank_mc\n\n| Model | task | acc |" in md


def test_unknown_lm_eval_task_is_a_one_line_error(tmp_path, llama, lm_eval_tasks):
    from types import SimpleNamespace

    from yunshan.eval import lm_eval_tasks as module

    tasks, _ = lm_eval_tasks
    with pytest.raises(FileNotFoundError, match=r"lmeval:missing\.yaml: no such YAML file"):
        module.task_manager("missing.yaml", [str(tasks)])
    with pytest.raises(FileNotFoundError, match=r"--include-path .*nowhere: no such folder"):
        module.task_manager("bank_mc", [str(tmp_path / "nowhere")])
    args = SimpleNamespace(include_path=[str(tasks)], limit=1, batch_size=2, add_bos=None, chat="auto",
                           max_new_tokens=None, trust_remote_code=False)
    result, files = module.run_task(llama, None, args, False, SimpleNamespace(name="lmeval:bank_mc"))
    assert result["n_samples"]["bank_mc"]["effective"] == 1 and result["limit"] == 1


def test_decontamination_reads_lm_eval_documents(tmp_path, lm_eval_tasks):
    from yunshan.eval.decontamination import DecontaminateArgs, run_decontamination

    tasks, _ = lm_eval_tasks
    leaked = ROWS[0]["question"] * 2 + "\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 利润分配\n答案："
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"text": leaked}, ensure_ascii=False) + "\n", encoding="utf-8")
    run_decontamination(DecontaminateArgs(inputs=[str(corpus)], tasks=["lmeval:bank_mc"], include_path=[str(tasks)],
                                          out=str(tmp_path / "d"), n=8, cjk_n=12))
    items = [json.loads(x) for x in (tmp_path / "d" / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [i["id"] for i in items] == ["bank_mc#test:0"] and items[0]["task"] == "lmeval:bank_mc"


# A task whose documents go through Python beside its YAML: importing utils.py or calling process writes a file.
CODED_YAML = MC_YAML.replace("task: bank_mc\n", "task: {task}\n") + "process_docs: !function utils.process\n"
UTILS_PY = """from pathlib import Path

Path({ran!r}, "RAN_import").write_text("ran")


def process(dataset):
    Path({ran!r}, "RAN_process").write_text("ran")
    return dataset
"""


@pytest.fixture
def coded_tasks(tmp_path) -> Path:
    """tasks/: coded_mc.yaml (its own !function) and included_mc.yaml (a plain YAML including base.yaml, whose
    !function it inherits), utils.py beside them; what ran leaves RAN_* files in tmp_path."""
    data = tmp_path / "data" / "test.jsonl"
    data.parent.mkdir()
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "coded_mc.yaml").write_text(CODED_YAML.format(task="coded_mc", data=data), encoding="utf-8")
    (tasks / "base.yaml").write_text(CODED_YAML.format(task="base_mc", data=data).replace(
        "task: base_mc\n", ""), encoding="utf-8")  # no task name: lm-eval indexes it as nothing, only includes it
    (tasks / "included_mc.yaml").write_text("include: base.yaml\ntask: included_mc\n", encoding="utf-8")
    (tasks / "utils.py").write_text(UTILS_PY.format(ran=str(tmp_path)), encoding="utf-8")
    return tasks


def _ran(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("RAN_*"))


def test_a_task_yamls_function_runs_only_with_trust_remote_code(tmp_path, llama_dir, coded_tasks, capsys):
    """yunshan eval and yunshan data decontaminate refuse a task YAML's !function (its own, or one a YAML it
    includes holds) in one line naming the YAML and the function, run nothing and exit non-zero; with
    --trust-remote-code the task runs, its code included."""
    from yunshan.cli import main

    tasks = coded_tasks
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"text": "银行 证券 保险"}, ensure_ascii=False) + "\n", encoding="utf-8")
    commands = {
        "eval": ["eval", "--model", str(llama_dir), "--batch-size", "2", "--no-progress", "--include-path",
                 str(tasks)],
        "data": ["data", "decontaminate", str(corpus), "--include-path", str(tasks)],
    }
    for command, argv in commands.items():
        for spec, yaml in (("coded_mc", "coded_mc.yaml"), (str(tasks / "coded_mc.yaml"), "coded_mc.yaml"),
                           ("included_mc", "base.yaml")):
            out = tmp_path / f"out_{command}_{yaml}"
            assert main([*argv, "--tasks", f"lmeval:{spec}", "--out", str(out)]) != 0
            err = capsys.readouterr().err.strip().splitlines()[-1]  # after the model's loading bar
            assert err.startswith(f"yunshan {command}"), err
            assert f"{tasks / yaml}: !function utils.process would run Python code from {tasks / 'utils.py'}" in err
            assert "--trust-remote-code" in err
            assert _ran(tmp_path) == [], (command, spec)
        assert main([*argv, "--tasks", "lmeval:included_mc", "--out", str(tmp_path / f"ok_{command}"),
                     "--trust-remote-code"]) == 0
        assert "RAN_process" in _ran(tmp_path)  # (imported once: lm-eval keeps the module for the second command)
        for ran in tmp_path.glob("RAN_*"):
            ran.unlink()
    from lm_eval.tasks import _factory, _yaml_loader

    # The guard is lifted after each load: lm-eval's own functions are back in place.
    assert _factory.load_yaml is _yaml_loader.load_yaml and _yaml_loader.load_yaml.__module__ == _yaml_loader.__name__
    assert _yaml_loader._import_func_in_yml.__module__ == _yaml_loader.__name__


def test_a_prompt_template_reaching_for_code_is_refused_without_trust_remote_code(tmp_path, llama_dir, capsys):
    """lm-eval renders a YAML's templates in a plain Jinja Environment, where a template reaches the os module: under
    yunshan they render in Jinja's sandbox unless --trust-remote-code, so such a template is one line and runs
    nothing; ordinary templates (every other test here) render as before."""
    from yunshan.cli import main

    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    made = tmp_path / "RAN_template"
    reach = "{{{{ cycler.__init__.__globals__.os.makedirs('" + str(made) + "', exist_ok=True) }}}}"
    yaml = tmp_path / "reach_mc.yaml"
    yaml.write_text(MC_YAML.replace("task: bank_mc", "task: reach_mc").replace(
        'doc_to_text: "', 'doc_to_text: "' + reach).format(data=data), encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"text": "银行"}, ensure_ascii=False) + "\n", encoding="utf-8")
    for argv in (["eval", "--model", str(llama_dir), "--batch-size", "2", "--no-progress"],
                 ["data", "decontaminate", str(corpus)]):
        assert main([*argv, "--tasks", f"lmeval:{yaml}", "--out", str(tmp_path / "refused")]) != 0
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"yunshan {argv[0]}") and "prompt template reads '__init__'" in err, err
        assert "--trust-remote-code" in err and not made.exists()
    assert main(["data", "decontaminate", str(corpus), "--tasks", f"lmeval:{yaml}", "--out", str(tmp_path / "ok"),
                 "--trust-remote-code"]) == 0
    assert made.is_dir()


def test_lm_evals_own_tasks_keep_their_functions():
    """lm-eval's own task folders are installed code: their !function resolves without the opt-in."""
    import lm_eval
    from lm_eval.tasks import _yaml_loader

    from yunshan.eval.lm_eval_tasks import task_code

    own = Path(lm_eval.__file__).parent / "tasks" / "hellaswag" / "hellaswag.yaml"
    with task_code(False):
        config = _yaml_loader.load_yaml(own, resolve_func=True)
    assert callable(config["process_docs"]) and config["process_docs"].__name__ == "process_docs"


def test_the_pipelines_decontamination_follows_the_eval_stages_opt_in():
    """In `yunshan run` the decontamination stage reads the eval section's lm-eval tasks under the opt-in the eval
    stage runs them with: eval.trust_remote_code or model.trust_remote_code (or its own), never without one."""
    from yunshan.pipeline import PipelineRecipe
    from yunshan.pipeline.stages import decontamination_plan
    from yunshan.arguments.recipe import load_recipe

    recipe_file = Path(__file__).resolve().parents[2] / "recipes" / "demo_tiny.yaml"
    for overrides, trusted in (([], False), (["eval.trust_remote_code=true"], True),
                               (["base.model.trust_remote_code=true"], True),
                               (["decontamination.trust_remote_code=true"], True)):
        recipe = load_recipe(PipelineRecipe, recipe_file, overrides)
        plan, _, _ = decontamination_plan(recipe, recipe.decontamination)
        assert plan.trust_remote_code is trusted, overrides
