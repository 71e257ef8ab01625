"""`peagle container args` and `peagle container dockerfile`. (h6)"""

import json


def _spec(**fields):
    return "SM_VLLM_SPECULATIVE_CONFIG=" + json.dumps({"model": "{tmp}", "method": "eagle3",
                                                       "num_speculative_tokens": 3, **fields})


ARGS = ["container", "args", "--env", "HF_MODEL_ID=Qwen/Qwen3-Coder-30B-A3B-Instruct"]
NO_SHELL_ENV = {"HF_MODEL_ID": None, "SM_VLLM_MODEL": None, "SM_VLLM_SPECULATIVE_CONFIG": None}
FIX = r": fix the container environment$"

CASES = [
    # args: the environment
    dict(id="args-shell-without-container-env", argv=["container", "args"], env=NO_SHELL_ENV, exit=2,
         stderr=r"no model: .*this shell has no container environment: pass --env HF_MODEL_ID=<model>"),
    dict(id="args-env-not-pair", argv=["container", "args", "--env", "NOEQUALS"], exit=2,
         stderr=r"--env 'NOEQUALS' is not KEY=VALUE: pass --env KEY=VALUE$"),
    dict(id="args-env-empty-key", argv=["container", "args", "--env", "=x"], exit=2, stderr=r"--env '=x' is not KEY=VALUE"),
    dict(id="args-env-bad-name", argv=["container", "args", "--env", "1X=y"], exit=2,
         stderr=r"--env name '1X' is not a valid variable name"),
    dict(id="args-spec-not-json", argv=[*ARGS, "--env", "SM_VLLM_SPECULATIVE_CONFIG=notjson"], exit=2,
         stderr=r"SM_VLLM_SPECULATIVE_CONFIG is not valid JSON \(Expecting value at column 1\)" + FIX),
    dict(id="args-spec-a-list", argv=[*ARGS, "--env", "SM_VLLM_SPECULATIVE_CONFIG=[]"], exit=2,
         stderr=r"must be one JSON object, got list" + FIX),
    dict(id="args-spec-a-string", argv=[*ARGS, "--env", 'SM_VLLM_SPECULATIVE_CONFIG="eagle3"'], exit=2,
         stderr=r"must be one JSON object, got str"),
    dict(id="args-spec-unknown-field", argv=[*ARGS, "--env", _spec(frob=1)], exit=2,
         stderr=r"has fields vLLM does not accept: frob" + FIX),
    dict(id="args-spec-parallel-without-eagle3", argv=[*ARGS, "--env", _spec(method="eagle", parallel_drafting=True)],
         exit=2, stderr=r"sets parallel_drafting but method is 'eagle'; P-EAGLE needs \"method\": \"eagle3\""),
    dict(id="args-spec-k-zero", argv=[*ARGS, "--env", _spec(num_speculative_tokens=0)], exit=2,
         stderr=r"num_speculative_tokens must be > 0, got 0"),
    dict(id="args-spec-k-string", argv=[*ARGS, "--env", _spec(num_speculative_tokens="3")], exit=2,
         stderr=r"num_speculative_tokens must be a whole number, got '3'"),
    dict(id="args-spec-k-float", argv=[*ARGS, "--env", _spec(num_speculative_tokens=2.5)], exit=2,
         stderr=r"num_speculative_tokens must be a whole number"),
    dict(id="args-spec-tensor-parallel", argv=[*ARGS, "--env", _spec(tensor_parallel_size=2)], exit=2,
         stderr=r"must not set tensor_parallel_size; use draft_tensor_parallel_size"),
    dict(id="args-drafter-missing", argv=[*ARGS, "--env", _spec(model="/nonexistent-drafter")], exit=2,
         stderr=r"drafter directory /nonexistent-drafter does not exist \(is the eagle channel mounted\?\)"),
    dict(id="args-drafter-without-config", files={"drafter/weights": ""},
         argv=[*ARGS, "--env", _spec(model="{tmp}/drafter", parallel_drafting=True)], exit=2,
         stderr=r"cannot read drafter config .*drafter/config.json"),
    dict(id="args-drafter-without-mask-token", files={"drafter/config.json": "{}"},
         argv=[*ARGS, "--env", _spec(model="{tmp}/drafter", parallel_drafting=True)], exit=2,
         stderr=r"names no mask token id"),
    dict(id="args-json-bad-spec", argv=[*ARGS, "--json", "--env", "SM_VLLM_SPECULATIVE_CONFIG=notjson"], exit=2,
         stderr=r"is not valid JSON"),
    # args: --env-file
    dict(id="env-file-missing", argv=["container", "args", "--env-file", "missing.env"], exit=2,
         stderr=r"--env-file missing.env not found: pass a file of KEY=VALUE lines$"),
    dict(id="env-file-is-directory", argv=["container", "args", "--env-file", "{tmp}"], exit=2,
         stderr=r"--env-file .* is a directory, not a file"),
    dict(id="env-file-bad-line", argv=["container", "args", "--env-file", "e.env"],
         files={"e.env": "# comment\nHF_MODEL_ID=x\nNOT VALID\n"}, exit=2,
         stderr=r"--env-file e.env line 3 \('NOT VALID'\) is not KEY=VALUE: write KEY=VALUE lines$"),
    dict(id="env-file-bad-name", argv=["container", "args", "--env-file", "e.env"], files={"e.env": "1BAD=x\n"},
         exit=2, stderr=r"--env-file e.env line 1: --env name '1BAD' is not a valid variable name"),
    dict(id="env-file-binary", argv=["container", "args", "--env-file", "e.env"], files={"e.env": b"\xff\xfe\x00\x01"},
         exit=2, stderr=r"--env-file e.env is not UTF-8 text"),
    dict(id="env-file-bad-spec", argv=["container", "args", "--env-file", "e.env"],
         files={"e.env": "HF_MODEL_ID=x\nSM_VLLM_SPECULATIVE_CONFIG={\n"}, exit=2,
         stderr=r"SM_VLLM_SPECULATIVE_CONFIG is not valid JSON"),
    # dockerfile
    dict(id="dockerfile-output-is-file", argv=["container", "dockerfile", "--output", "f.txt"], files={"f.txt": "x"},
         exit=2, stderr=r"--output f.txt is a file, not a directory: choose a directory for --output$"),
    dict(id="dockerfile-output-below-file", argv=["container", "dockerfile", "--output", "f.txt/sub"],
         files={"f.txt": "x"}, exit=2, stderr=r"cannot write to --output f.txt/sub: Not a directory"),
    dict(id="dockerfile-output-under-dev-null", argv=["container", "dockerfile", "--output", "/dev/null/x"], exit=2,
         stderr=r"cannot write to --output /dev/null/x"),
    dict(id="dockerfile-output-unwritable", argv=["container", "dockerfile", "--output", "/proc/peagle"], exit=2,
         stderr=r"cannot write to --output /proc/peagle: .*: choose a directory you can write$"),
    dict(id="dockerfile-output-not-empty", argv=["container", "dockerfile", "--output", "d"], files={"d/x": "x"},
         exit=2, stderr=r"--output d is not empty: choose another --output or pass --force$"),
    dict(id="dockerfile-default-output-not-empty", argv=["container", "dockerfile"],
         files={"peagle-container/old": "x"}, exit=2, stderr=r"--output peagle-container is not empty"),
    dict(id="dockerfile-json-output-is-file", argv=["container", "dockerfile", "--output", "f.txt", "--json"],
         files={"f.txt": "x"}, exit=2, stderr=r"is a file, not a directory"),
    dict(id="dockerfile-wheel-missing", argv=["container", "dockerfile", "--wheel", "missing.whl"], exit=2,
         stderr=r"--wheel missing.whl is not a peagle_deploy-\*.whl file: build one with 'pip wheel --no-deps \.'$"),
    dict(id="dockerfile-wheel-wrong-name", argv=["container", "dockerfile", "--wheel", "foo.whl"],
         files={"foo.whl": "x"}, exit=2, stderr=r"--wheel foo.whl is not a peagle_deploy-\*.whl file"),
    dict(id="dockerfile-wheel-is-directory", argv=["container", "dockerfile", "--wheel", "peagle_deploy-0.1.0-py3-none-any.whl"],
         files={"peagle_deploy-0.1.0-py3-none-any.whl/x": ""}, exit=2, stderr=r"is not a peagle_deploy-\*.whl file"),
    dict(id="dockerfile-base-not-image", argv=["container", "dockerfile", "--base", "not an image!!"], exit=2,
         stderr=r"--base 'not an image!!' is not an image reference: pass e.g. registry/repo:tag$"),
    dict(id="dockerfile-base-empty", argv=["container", "dockerfile", "--base", ""], exit=2,
         stderr=r"--base '' is not an image reference"),
    dict(id="dockerfile-unknown-option", argv=["container", "dockerfile", "--out", "x"], exit=2,
         stderr=r"No such option: --out.*see 'peagle container dockerfile --help'$"),
]
