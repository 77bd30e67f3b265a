"""`yunshan data prepare` end to end on a corpus written here: what is kept, dropped, masked and found, the report;
bad input by policy; the same bytes after a kill in the MinHash stages and a rerun; the same bytes on a local 2-CPU
Ray cluster; Slurm job scripts written, checked and run as Slurm would run them; the pipeline's prepare stage."""

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("datatrove", reason="the prepare extra (datatrove) is not installed")

from yunshan.data.records import BadRecordError  # noqa: E402
from yunshan.prepare.args import InputArgs, LanguageArgs, NearDedupArgs, PrepareArgs  # noqa: E402
from yunshan.prepare.pipeline import PrepareError, run_prepare  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SUBJECTS = ["出租人", "承租人", "物业服务人", "建设单位", "业主委员会", "行政机关", "人民法院", "当事人", "债务人", "保证人",
            "用人单位", "劳动者", "消费者", "经营者", "受托人", "委托人"]
VERBS = ["应当", "可以", "不得", "有权", "必须"]
ACTS = ["在合同约定的期限内履行交付义务", "向有关部门报告并说明理由", "妥善保管相关材料和记录", "按照国家规定承担相应的责任",
        "及时通知对方并提供必要的证明", "依法申请复议或者提起诉讼", "采取合理措施防止损失扩大", "公开收费项目和标准",
        "对违法行为进行调查处理", "书面告知权利义务和救济途径", "在三十日内作出书面决定", "退还已经收取的费用"]
TAILS = ["但是法律另有规定的除外", "具体办法由国务院规定", "情节严重的依法追究责任", "逾期不改正的处以罚款",
         "造成损失的应当赔偿", "当事人另有约定的从其约定"]


COMMON = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"


def article(rng: random.Random, n: int) -> str:
    body = "".join(rng.choice(COMMON) for _ in range(rng.randint(18, 30)))
    return f"第{n}条　{rng.choice(SUBJECTS)}{rng.choice(VERBS)}{body}，{rng.choice(TAILS)}。"


def law(rng: random.Random, title: str, articles: int = 14) -> str:
    return f"# {title}\n\n" + "\n".join(article(rng, i + 1) for i in range(articles))


ID = "11010519491231002X"  # the example of GB 11643-1999 itself


def write_corpus(folder: Path) -> dict:
    """A corpus with one of everything; returns what each document is for."""
    rng = random.Random(46)
    docs = [law(rng, f"某某市第{i}号管理条例") for i in range(24)]
    base = docs[0]
    amended = base.replace("第3条", "第3条（修正）").replace("第9条", "第9条（修正）") + "\n本条例自2024年1月1日起施行。"
    records = [{"text": d} for d in docs[:22]]
    records += [
        {"text": docs[1]},                                                       # an exact duplicate
        {"text": amended},                                                       # a near duplicate of docs[0]
        {"text": "首页 > 法规 > 正文\n上一篇：关于某事的通知\n" + docs[22] + "\n版权所有 © 2024 某某网"},  # furniture
        {"text": docs[23] + f"\n联系人身份证号{ID}，电话13812345678。"},         # personal data
        {"text": "The tenant shall pay the rent on time and keep the premises in good repair during the lease, "
                 "and the landlord shall return the deposit within thirty days after the end of the tenancy."},
        {"text": "点击这里立即领取新年大奖，名额有限先到先得，快来参加我们的活动吧！" * 30},    # spam
    ]
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    lines.insert(5, '{"text": "unterminated')                                   # malformed JSON
    lines.insert(9, json.dumps({"body": "no text field"}, ensure_ascii=False))   # a record without text
    path = folder / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "more").mkdir()
    (folder / "more" / "extra.jsonl").write_text(json.dumps({"text": law(rng, "另一部条例")}, ensure_ascii=False)
                                                 + "\n", encoding="utf-8")
    return {"docs": docs, "amended": amended, "path": path}


def recipe(folder: Path, out: Path, **changes) -> PrepareArgs:
    values = dict(inputs=[InputArgs(name="laws", path=[str(folder / "corpus.jsonl"), str(folder / "more")])],
                  out=str(out), tasks=2, workers=2, on_bad_record="skip", language=LanguageArgs(keep=["zh"]),
                  near_dedup=NearDedupArgs(buckets=4, hashes_per_bucket=4))
    values.update(changes)
    return PrepareArgs(**values)


def read_output(out: Path) -> list[str]:
    """The prepared corpus as `yunshan cpt` reads it: a source naming the documents folder."""
    from yunshan.data.sources import SourceArgs, read_file_records, resolve_files

    source = SourceArgs(name="prepared", path=str(out / "documents"))
    return [r.text for path in resolve_files(source) for r, _ in read_file_records(path, source, {})]


def output_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "documents").glob("*"))}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    return {**write_corpus(folder), "folder": folder}


@pytest.fixture(scope="module")
def local_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    summary = run_prepare(recipe(corpus["folder"], out), progress=False)
    return out, summary


def test_kept_dropped_masked_and_found(corpus, local_run):
    out, summary = local_run
    texts = read_output(out)
    docs = corpus["docs"]
    # every distinct law once (the furniture removed from docs[22], the identifiers masked in docs[23]), one of the
    # near-duplicate pair, and the law of the extra file
    assert len(texts) == 22 + 2 + 1
    assert sum(t in (docs[0], corpus["amended"]) for t in texts) == 1
    assert docs[22] in texts and not any("上一篇" in t or "版权所有" in t for t in texts)
    assert docs[23] + "\n联系人身份证号[身份证号]，电话[手机号]。" in texts
    assert not any(ID in t or "13812345678" in t for t in texts)
    assert not any("tenant" in t or "大奖" in t for t in texts)
    dropped = summary["dropped"]
    assert dropped["yunshan records: bad_malformed_json"] == 1 and dropped["yunshan records: bad_missing_field"] == 1
    assert dropped["language (py3langid): language"] == 1
    assert dropped["quality (zh): dup_char_ngram"] == 1
    assert dropped["exact duplicates: exact_duplicate"] == 1
    assert dropped["near duplicates: near_duplicate"] == 1
    assert summary["documents_read"] == 29 and summary["documents_written"] == 25
    assert summary["near_duplicates"]["clusters"] == 1
    cluster = json.loads((out / "near_duplicates.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert cluster["size"] == 2 and len(cluster["kept"]) == 1 and len(cluster["removed"]) == 1
    assert summary["funnel"][0]["chars"] > summary["funnel"][-1]["chars"] == sum(len(t) for t in texts)
    report = (out / "prepare_report.md").read_text(encoding="utf-8")
    assert "| clean | quality (zh) |" in report and "near_duplicate 1" in report
    assert (out / "funnel.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "work" / "clean").exists()  # intermediates removed; examples and cluster lists stay


def test_bad_records_stop_the_run_in_one_line_under_fail(corpus, tmp_path):
    with pytest.raises(PrepareError) as err:
        run_prepare(recipe(corpus["folder"], tmp_path / "out", on_bad_record="fail"), progress=False)
    message = str(err.value)
    assert "\n" not in message and "corpus.jsonl:6" in message and "malformed_json" in message
    assert "prepare.on_bad_record: skip" in message


def test_a_folder_not_made_by_a_preparation_is_never_cleaned(corpus, tmp_path):
    out = tmp_path / "mine"
    (out / "documents").mkdir(parents=True)
    (out / "documents" / "keep.txt").write_text("mine")
    with pytest.raises(PrepareError, match=r"holds documents but no plan\.json"):
        run_prepare(recipe(corpus["folder"], out), progress=False)
    assert (out / "documents" / "keep.txt").read_text() == "mine"


def test_empty_file_and_oversized_record(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "empty.jsonl").write_bytes(b"")
    big = "法" * (1 << 20)  # 3 MB of UTF-8 in one record, over a 1 MB limit
    (folder / "big.jsonl").write_text(json.dumps({"text": big}, ensure_ascii=False) + "\n" +
                                      json.dumps({"text": law(random.Random(1), "条例")}, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    args = dict(inputs=[InputArgs(name="x", path=str(folder))], tasks=1, workers=1, max_record_mb=1,
                near_dedup=NearDedupArgs(enabled=False), exact_dedup=False)
    with pytest.raises(PrepareError, match=r"big\.jsonl:1: oversized_record \(a line of 3,145,7\d\d bytes\)"):
        run_prepare(PrepareArgs(out=str(tmp_path / "a"), **args), progress=False)
    only_empty = dict(args, inputs=[InputArgs(name="x", path=str(folder / "empty.jsonl"))])
    with pytest.raises(PrepareError, match=r"empty\.jsonl is empty \(no record\)"):
        run_prepare(PrepareArgs(out=str(tmp_path / "c"), **only_empty), progress=False)
    summary = run_prepare(PrepareArgs(out=str(tmp_path / "b"), on_bad_record="skip", **args), progress=False)
    assert summary["dropped"]["yunshan records: bad_empty_file"] == 1
    assert summary["dropped"]["yunshan records: bad_oversized_record"] == 1
    assert summary["documents_written"] == 1


def test_a_fifty_megabyte_line_is_read_past_in_bounded_memory(tmp_path):
    import tracemalloc

    from yunshan.data.records import read_records

    path = tmp_path / "huge.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"text": "' + "x" * (50 << 20) + '"}\n{"text": "next"}\n')
    tracemalloc.start()
    records = [r for _, r, _ in read_records(str(path), max_line_bytes=8 << 20)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert records[0].reason == "oversized_record" and records[1] == {"text": "next"}
    assert peak < 20 << 20, f"peak {peak / 2**20:.0f} MB while reading past a 50 MB line"


def test_datatrove_jsonl_reader_loses_what_yunshan_counts(tmp_path):
    """Why the first block is yunshan's reader: datatrove 0.10.1's JsonlReader decodes the file in blocks and ends it
    at its first invalid UTF-8 byte with one warning: here every line is lost, the good ones before it too."""
    from datatrove.pipeline.readers import JsonlReader

    from yunshan.prepare.readers import RecordReader

    path = tmp_path / "five.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": "b\xff"}\n{"text": "c"}\n{"text": \n{"text": "e"}\n')
    theirs = [d.text for d in JsonlReader(str(tmp_path)).run()]
    reader = RecordReader("x", [str(path)], on_bad_record="skip")
    ours = [d.text for d in reader.run()]
    assert theirs == [] and ours == ["a", "c", "e"]
    assert reader.stats["bad_invalid_utf8"].total == 1 and reader.stats["bad_malformed_json"].total == 1


KILLED = """
import sys
from yunshan.prepare.args import InputArgs, NearDedupArgs, PrepareArgs, LanguageArgs
from yunshan.prepare.pipeline import run_prepare
run_prepare(PrepareArgs(inputs=[InputArgs(name="laws", path=[sys.argv[1]])], out=sys.argv[2], tasks=4, workers=1,
                        on_bad_record="skip", language=LanguageArgs(keep=["zh"]),
                        near_dedup=NearDedupArgs(buckets=4, hashes_per_bucket=4)), progress=False)
"""


def test_a_kill_in_the_minhash_stages_then_a_rerun_gives_the_same_output(corpus, tmp_path):
    args = dict(inputs=[InputArgs(name="laws", path=[str(corpus["path"])])], tasks=4, workers=1,
                on_bad_record="skip", language=LanguageArgs(keep=["zh"]),
                near_dedup=NearDedupArgs(buckets=4, hashes_per_bucket=4))
    whole = tmp_path / "whole"
    run_prepare(PrepareArgs(out=str(whole), **args), progress=False)
    killed = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-c", KILLED, str(corpus["path"]), str(killed)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    signature = killed / "logs" / "minhash_signature" / "completions"
    deadline = time.time() + 240
    while not (signature.is_dir() and any(signature.iterdir())):
        assert process.poll() is None, "the run ended before its MinHash stages could be interrupted"
        assert time.time() < deadline
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / "logs" / "write" / "completions").is_dir(), "killed too late: the MinHash stages had ended"
    done_before = len(list(signature.iterdir()))
    summary = run_prepare(PrepareArgs(out=str(killed), **args), progress=False)
    assert summary["resumed"] and done_before < 4
    assert output_bytes(killed) == output_bytes(whole) and output_bytes(whole)
    assert json.loads((killed / "prepare_report.json").read_text())["dropped"] == \
        json.loads((whole / "prepare_report.json").read_text())["dropped"]


def test_ray_and_local_executors_give_the_same_bytes(corpus, local_run, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "ray"
    summary = run_prepare(recipe(corpus["folder"], out, executor="ray"), progress=False)
    local_out, local_summary = local_run
    assert output_bytes(out) == output_bytes(local_out) and output_bytes(out)
    assert summary["dropped"] == local_summary["dropped"]
    assert (out / "logs" / "write" / "logs").is_dir()  # each task's log, copied back from the Ray worker


FAKE_SBATCH = """#!/bin/sh
# Records each submission (arguments and script) as sbatch would receive it, and answers as sbatch does.
n=$(ls "$SBATCH_LOG" | wc -l)
mkdir -p "$SBATCH_LOG/$n"
printf '%s\\n' "$@" > "$SBATCH_LOG/$n/args"
for a in "$@"; do case "$a" in -*) ;; *) cp "$a" "$SBATCH_LOG/$n/script";; esac; done
echo "Submitted batch job $((1000 + n))"
"""


def test_slurm_job_scripts_are_written_chained_and_run_as_slurm_would(corpus, local_run, tmp_path):
    """No Slurm here: a stand-in sbatch records what datatrove submits; the test checks every script (directives,
    job array, afterok chain, the pickled pipeline) and then runs each array task as Slurm would (the script's
    launch_pickled_pipeline with SLURM_ARRAY_TASK_ID), in dependency order: the output is the local run's, byte for
    byte."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho localhost\n")  # `scontrol show hostnames`: the node list
    (bin_dir / "scontrol").chmod(0o755)
    log = tmp_path / "sbatch"
    log.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "SBATCH_LOG": str(log)}
    out = tmp_path / "slurm"
    config = tmp_path / "prepare.yaml"
    config.write_text(json.dumps({
        "inputs": [{"name": "laws", "path": [str(corpus["folder"] / "corpus.jsonl"), str(corpus["folder"] / "more")]}],
        "out": str(out), "tasks": 2, "workers": 2, "on_bad_record": "skip", "language": {"keep": ["zh"]},
        "near_dedup": {"buckets": 4, "hashes_per_bucket": 4}, "executor": "slurm",
        "slurm": {"partition": "cpu", "time": "02:00:00", "sbatch_args": {"account": "legal"}}}))
    result = subprocess.run([sys.executable, "-m", "yunshan.cli", "data", "prepare", "--config", str(config)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "submitted to Slurm" in result.stdout
    stages = ["clean", "exact_signature", "exact_find", "minhash_signature", "minhash_buckets", "minhash_cluster",
              "write"]
    jobs = sorted((p for p in log.iterdir()), key=lambda p: int(p.name))
    scripts = [(j / "script").read_text() for j in jobs]
    arrays = [s for s in scripts if "launch_pickled_pipeline" in s]
    assert len(arrays) == len(stages)  # one job array per stage, each followed by datatrove's merge_stats job
    tasks = {"clean": 2, "exact_signature": 2, "exact_find": 1, "minhash_signature": 2, "minhash_buckets": 4,
             "minhash_cluster": 1, "write": 2}
    previous = None
    for stage, script in zip(stages, arrays):
        assert f"#SBATCH --array=0-{tasks[stage] - 1}%2" in script or f"#SBATCH --array=0-{tasks[stage] - 1}" in script
        assert "#SBATCH --partition=cpu" in script and "#SBATCH --time=02:00:00" in script
        assert "#SBATCH --account=legal" in script and f"job-name=yunshan_prepare_{stage}" in script
        assert f"source {sys.prefix}/bin/activate" in script
        pickled = out / "logs" / stage / "executor.pik"
        assert f"launch_pickled_pipeline {pickled}" in script and pickled.is_file()
        args = (jobs[scripts.index(script)] / "args").read_text().split()
        if previous is not None:
            assert f"--dependency=afterok:{previous}" in args
        previous = 1000 + scripts.index(script)
    # run every array task in order, as Slurm would once each dependency is met
    for stage in stages:
        for task in range(tasks[stage]):
            run = subprocess.run(["launch_pickled_pipeline", str(out / "logs" / stage / "executor.pik")],
                                 env={**env, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_NODELIST": "localhost",
                                      "RUN_OFFSET": "0"}, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr[-2000:]
    result = subprocess.run([sys.executable, "-m", "yunshan.cli", "data", "prepare", "--config", str(config)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "Corpus preparation" in result.stdout, result.stderr[-2000:]
    assert output_bytes(out) == output_bytes(local_run[0])


def test_the_pipeline_runs_prepare_first_and_the_tokenizer_reads_its_corpus(corpus, tmp_path):
    """`yunshan run` with a prepare section: ${prepared} is its corpus; the dry run does not call the corpus missing
    before it exists; the stage runs first into OUTPUT_DIR/prepare, the tokenizer extension learns on what it wrote,
    the run report carries its table; a rerun skips both; the other stages keep their folder numbers."""
    import yaml

    from fixtures import train_tokenizer
    from yunshan.pipeline import PipelineRecipe, PipelineRunner
    from yunshan.arguments.recipe import load_recipe

    base = tmp_path / "base"
    train_tokenizer(base)
    (base / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 400}))
    data = {"name": "prep", "output_dir": str(tmp_path / "run"), "model": {"name_or_path": str(base)},
            "prepare": {"inputs": [{"name": "laws", "path": str(corpus["path"])}], "tasks": 2, "workers": 2,
                        "on_bad_record": "skip", "language": {"keep": ["zh"]},
                        "near_dedup": {"buckets": 4, "hashes_per_bucket": 4}},
            "tokenizer_extension": {"corpus": ["${prepared}"], "new_tokens": 20, "tokens_per_new_token": 1}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    recipe = load_recipe(PipelineRecipe, path)
    assert recipe.tokenizer_extension.corpus == [str(tmp_path / "run" / "prepare" / "documents")]
    plan = PipelineRunner(recipe, path).dry_run()
    assert not [p for p in plan["problems"] if "missing" in p], plan["problems"]
    assert [(p["stage"], p["action"]) for p in plan["plan"][:2]] == [("prepare", "run"), ("base", "disabled")]
    own = load_recipe(PipelineRecipe, path, ["prepare.inputs.laws.path=${prepared}"])
    assert any("is the prepare stage's own output" in p for p in PipelineRunner(own, path).dry_run()["problems"])
    with pytest.raises(PrepareError, match=r"prepare\.inputs\.laws\.path: .* lies inside prepare\.out"):
        run_prepare(dataclasses.replace(own.prepare, out=str(tmp_path / "run" / "prepare")), progress=False)
    manifest = PipelineRunner(recipe, path).run()
    run = tmp_path / "run"
    assert manifest.stage("prepare").summary["documents_written"] == 24
    assert (run / "prepare" / "documents").is_dir() and (run / "01_tokenizer" / "tokenizer.json").is_file()
    assert manifest.stage("tokenizer").summary["new_tokens"] > 0
    assert "## Corpus preparation" in (run / "report.md").read_text(encoding="utf-8")
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "Corpus preparation" in page and 'alt="characters from raw to kept" src="data:image/png;base64,' in page
    again = PipelineRunner(load_recipe(PipelineRecipe, path), path).run()
    assert again.stage("tokenizer").fingerprint == manifest.stage("tokenizer").fingerprint


@pytest.mark.parametrize("path", sorted((ROOT / "recipes" / "prepare").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_prepare_configs_load_and_dry_run(path, monkeypatch, tmp_path):
    """Every recipes/prepare/*.yaml loads; its header gives the command; the dry run resolves its inputs (the real
    laws corpus, or a stand-in file where ../shared/realdata is absent)."""
    from yunshan.prepare.pipeline import describe_prepare
    from yunshan.arguments.recipe import load_recipe

    text = path.read_text(encoding="utf-8")
    assert text.startswith("#") and "yunshan data prepare --config" in text.split("\n\n")[0]
    if not (ROOT.parent / "shared" / "realdata" / "laws" / "laws.jsonl.zst").is_file():
        (tmp_path / "laws").mkdir()
        (tmp_path / "laws" / "laws.jsonl.zst").write_bytes(b"stand-in")
        monkeypatch.setenv("YUNSHAN_REALDATA", str(tmp_path))
    args = load_recipe(PrepareArgs, path)
    plan = describe_prepare(args)
    assert plan["inputs"] and [s["stage"] for s in plan["stages"]][0] == "clean" and plan["corpus"].endswith("documents")


def test_warc_and_html_inputs_go_through_trafilatura(tmp_path):
    """A WARC file (datatrove's WarcReader) and a JSONL of HTML pages (`html: true`): the main text extracted by
    trafilatura, the page's menu and footer gone."""
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    rng = random.Random(7)
    bodies = [law(rng, f"某某市第{i}号条例", articles=8) for i in range(2)]

    def page(body: str) -> str:
        paragraphs = "".join(f"<p>{line}</p>" for line in body.split("\n") if line.strip())
        return (f"<html><head><title>条例</title></head><body><nav><a href='/'>首页</a> | <a href='/news'>新闻</a>"
                f"</nav><article>{paragraphs}</article><footer>版权所有 © 2024 某某网</footer></body></html>")

    with open(tmp_path / "crawl.warc.gz", "wb") as f:
        writer = WARCWriter(f, gzip=True)
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record("https://example.org/law0", "response",
                                                      payload=BytesIO(page(bodies[0]).encode("utf-8")),
                                                      http_headers=headers))
    (tmp_path / "pages.jsonl").write_text(json.dumps({"html": page(bodies[1])}, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    summary = run_prepare(PrepareArgs(
        inputs=[InputArgs(name="crawl", path=str(tmp_path / "crawl.warc.gz"), format="warc"),
                InputArgs(name="pages", path=str(tmp_path / "pages.jsonl"), text_field="html", html=True)],
        out=str(tmp_path / "out"), tasks=1, workers=1, language=LanguageArgs(keep=["zh"]),
        near_dedup=NearDedupArgs(enabled=False)), progress=False)
    texts = read_output(tmp_path / "out")
    assert summary["documents_written"] == 2 and len(texts) == 2
    for body in bodies:
        first_article = body.split("\n")[2].split("\u3000")[1]  # trafilatura writes the ideographic space as " "
        text = next(t for t in texts if first_article in t)
        assert "第1条 " + first_article in text and "第8条" in text
        assert "版权所有" not in text and "首页" not in text and "<p>" not in text


def test_the_laws_recipes_read_the_prepared_corpus_and_unprepared_gives_back_the_raw_one(monkeypatch):
    """Both laws recipes prepare the laws corpus and train on what the preparation wrote (issue 46); `unprepared`
    (what benchmarks that run one stage without the preparation call) puts the raw release back in both places and
    leaves every other source alone."""
    from yunshan.pipeline import PipelineRecipe
    from yunshan.pipeline.stages import unprepared
    from yunshan.arguments.recipe import load_recipe

    monkeypatch.setenv("YUNSHAN_REALDATA", "/nonexistent/realdata")  # paths are only compared, never opened
    root = Path(__file__).resolve().parents[2]
    for name in ("smollm2-135m_laws.yaml", "gemma3-270m_laws.yaml"):
        recipe = load_recipe(PipelineRecipe, root / "recipes" / name)
        prepared = str(Path(recipe.output_dir) / "prepare" / "documents")
        assert [i.path for i in recipe.prepare.inputs] == ["/nonexistent/realdata/laws/laws.jsonl.zst"], name
        assert recipe.tokenizer_extension.corpus == [prepared], name
        laws = {s.name: s.path for s in recipe.cpt.data.sources}
        assert laws["laws"] == prepared, name
        raw = unprepared(recipe)
        assert raw.tokenizer_extension.corpus == ["/nonexistent/realdata/laws/laws.jsonl.zst"], name
        paths = {s.name: s.path for s in raw.cpt.data.sources}
        assert paths == {**laws, "laws": "/nonexistent/realdata/laws/laws.jsonl.zst"}, name
