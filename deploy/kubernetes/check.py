#!/usr/bin/env python3
"""Checks grpclab's Kubernetes manifests without a cluster, and shows what each generator pod
would run.

    python3 deploy/kubernetes/check.py
        Renders the base and every overlay with `kubectl kustomize`, validates every object
        strictly against the Kubernetes schemas (kubernetes-validate, unknown fields refused)
        and checks what the schemas cannot: one shard per pod and never a second run,
        requests equal to limits, the server's limits equal to the bench settings, every
        $(VAR) in the generators' arguments defined, and each pod's --shard its own.

    python3 deploy/kubernetes/check.py --pods DIR [--set KEY=VALUE ...]
        Prints, as JSON, each generator pod of DIR's Job: its index, its arguments expanded
        as the kubelet expands them, and its environment (the ConfigMaps', the container's,
        and JOB_COMPLETION_INDEX from the Job controller). --set changes a ConfigMap value
        first, as a per-run ConfigMap would (e.g. GRPCLAB_TARGET=127.0.0.1:50051).

Exit code 0 when everything holds; 1 with one line per problem otherwise; 2 when a tool is
missing (kubectl, or the kubernetes-validate package: pip install kubernetes-validate).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The Kubernetes release whose schemas the manifests must satisfy: the oldest the docs
# promise (Indexed Jobs with JOB_COMPLETION_INDEX are stable since 1.24).
KUBERNETES_VERSION = "1.30"


def fail_tool(message):
    print(f"check.py: {message}", file=sys.stderr)
    sys.exit(2)


def render(directory):
    """The objects `kubectl kustomize DIR` renders."""
    import yaml

    if shutil.which("kubectl") is None:
        fail_tool("kubectl is needed to render the manifests (kubectl kustomize); install kubectl")
    out = subprocess.run(
        ["kubectl", "kustomize", directory], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"check.py: kubectl kustomize {directory} failed: {out.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def kustomizations():
    """The base and every overlay."""
    dirs = [os.path.join(HERE, "base")]
    overlays = os.path.join(HERE, "overlays")
    for name in sorted(os.listdir(overlays)):
        if os.path.isfile(os.path.join(overlays, name, "kustomization.yaml")):
            dirs.append(os.path.join(overlays, name))
    return dirs


def expand(text, env):
    """$(VAR) expanded as the kubelet expands container arguments
    (k8s.io/kubernetes/third_party/forked/golang/expansion): a defined variable is replaced,
    an undefined one is left as written, $$ is a literal $."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2 : end]
                    out.append(env[name] if name in env else text[i : end + 1])
                    i = end + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


def by_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


def config_maps(objects):
    return {o["metadata"]["name"]: o.get("data", {}) for o in by_kind(objects, "ConfigMap")}


def container_env(container, maps, index=None):
    """The environment the kubelet gives a container: envFrom's ConfigMaps, then env (which
    wins), then what the Job controller adds for an Indexed Job's pod."""
    env = {}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef", {}).get("name")
        env.update(maps.get(ref, {}))
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
    if index is not None:
        env["JOB_COMPLETION_INDEX"] = str(index)
    return env


def quantity_problems(where, resources):
    problems = []
    requests, limits = resources.get("requests", {}), resources.get("limits", {})
    for key in ("cpu", "memory"):
        if key not in limits:
            problems.append(f"{where}: no {key} limit (Guaranteed QoS needs one)")
        elif str(requests.get(key)) != str(limits.get(key)):
            problems.append(
                f"{where}: {key} request {requests.get(key)} differs from its limit {limits.get(key)}: not Guaranteed QoS"
            )
    memory = str(limits.get("memory", ""))
    if re.fullmatch(r"[0-9.]+m", memory):
        problems.append(
            f"{where}: memory {memory} is millibytes in Kubernetes (grpc_bench's 512m means 512Mi): write Mi or Gi"
        )
    return problems


def semantic_problems(directory, objects):
    """What the schemas cannot check."""
    name = os.path.relpath(directory, HERE)
    problems = []
    maps = config_maps(objects)
    jobs = by_kind(objects, "Job")
    deployments = by_kind(objects, "Deployment")
    if len(jobs) != 1 or len(deployments) != 1:
        return [f"{name}: expected one generator Job and one server Deployment"]
    job, server = jobs[0], deployments[0]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    generator = pod["containers"][0]
    env = container_env(generator, maps)
    shards = env.get("GRPCLAB_SHARDS")
    if spec.get("completionMode") != "Indexed":
        problems.append(f"{name}: the Job must be Indexed (each pod gets its shard from JOB_COMPLETION_INDEX)")
    if not (spec.get("completions") == spec.get("parallelism") == (int(shards) if shards and shards.isdigit() else None)):
        problems.append(
            f"{name}: completions ({spec.get('completions')}), parallelism ({spec.get('parallelism')}) and GRPCLAB_SHARDS ({shards}) must be one number: every shard runs, all at once"
        )
    if spec.get("backoffLimit") != 0:
        problems.append(f"{name}: backoffLimit must be 0 (a shard that ran twice would count twice)")
    if pod.get("restartPolicy") != "Never":
        problems.append(f"{name}: restartPolicy must be Never (a restarted generator starts late)")
    labels = job["spec"]["template"].get("metadata", {}).get("labels", {})
    anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    if not any(
        term.get("topologyKey") == "kubernetes.io/hostname"
        and all(labels.get(k) == v for k, v in term.get("labelSelector", {}).get("matchLabels", {}).items())
        for term in anti
    ):
        problems.append(f"{name}: generators need required anti-affinity on kubernetes.io/hostname matching their own labels (one per node)")
    for container in pod["containers"]:
        problems += quantity_problems(f"{name}: generator container {container['name']}", container.get("resources", {}))
    server_container = server["spec"]["template"]["spec"]["containers"][0]
    problems += quantity_problems(f"{name}: server container", server_container.get("resources", {}))
    bench = container_env(server_container, maps)
    limits = server_container.get("resources", {}).get("limits", {})
    for key, field in (("GRPC_SERVER_CPUS", "cpu"), ("GRPC_SERVER_RAM", "memory")):
        if str(limits.get(field)) != str(bench.get(key)):
            problems.append(f"{name}: the server's {field} limit {limits.get(field)} is not {key}={bench.get(key)}")
    if shards and shards.isdigit():
        for index in range(int(shards)):
            pod_env = container_env(generator, maps, index)
            args = [expand(arg, pod_env) for arg in generator.get("args", [])]
            left = [arg for arg in args if re.search(r"\$\([A-Za-z_][A-Za-z0-9_]*\)", arg)]
            if left:
                problems.append(f"{name}: pod {index}: undefined variable(s) left in its arguments: {left}")
            if "--shard" not in args or args[args.index("--shard") + 1] != f"{index}/{shards}":
                problems.append(f"{name}: pod {index} does not run --shard {index}/{shards}: {args}")
    return problems


def validate_strictly(directory, objects):
    try:
        import kubernetes_validate
    except ImportError:
        fail_tool("the kubernetes-validate package is needed: python3 -m pip install kubernetes-validate")
    problems = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            where = f"{os.path.relpath(directory, HERE)}: {obj.get('kind')} {obj.get('metadata', {}).get('name')}"
            problems.append(f"{where}: {err.message} (at {'/'.join(str(p) for p in err.path)})")
    return problems


def pods(directory, overrides):
    objects = render(directory)
    maps = config_maps(objects)
    for data in maps.values():
        for key, value in overrides.items():
            if key in data:
                data[key] = value
    job = by_kind(objects, "Job")[0]
    generator = job["spec"]["template"]["spec"]["containers"][0]
    shards = int(job["spec"]["completions"])
    out = []
    for index in range(shards):
        env = container_env(generator, maps, index)
        out.append({"index": index, "args": [expand(a, env) for a in generator.get("args", [])], "env": env})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", metavar="DIR", help="print DIR's generator pods as JSON")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.pods:
        overrides = dict(item.split("=", 1) for item in args.set)
        print(json.dumps(pods(args.pods, overrides), indent=1))
        return 0
    problems = []
    for directory in kustomizations():
        objects = render(directory)
        problems += validate_strictly(directory, objects)
        problems += semantic_problems(directory, objects)
        print(f"checked {os.path.relpath(directory, HERE)}: {len(objects)} objects")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
