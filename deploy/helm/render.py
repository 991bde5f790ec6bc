#!/usr/bin/env python3
"""Render the Operon Helm chart offline, as `helm template` would, with Helm's own engine.

Uses the `helm-python-sdk` package (`python3 -m pip install helm-python-sdk`), which
bundles Helm v4's Go SDK as a shared library: no `helm` binary, no cluster, no network.
Prints the manifests as one YAML stream, each document headed by `# Source: <template>`.

    deploy/helm/render.py                                  # defaults
    deploy/helm/render.py --set replicas=3 --set serviceMonitor.enabled=true
    deploy/helm/render.py -f my-values.yaml --include-crds
    deploy/helm/render.py --lint                           # helm lint --strict

Values are merged in Helm's order: --values files, then --set-json, --set, --set-string
and --set-file expressions, each parsed by Helm's own strvals parser.
Exit status: 0 rendered (or linted clean), 1 the chart failed to load, render or lint,
2 the package is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of user values: maps merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def rendered_documents(rendered: dict[str, str]) -> list[tuple[str, str]]:
    """The templates that produced manifests, by path: no partials, no NOTES.txt, no
    template that rendered to nothing but whitespace and comments."""
    out = []
    for path in sorted(rendered):
        base = os.path.basename(path)
        if base.startswith("_") or base == "NOTES.txt":
            continue
        body = rendered[path]
        meaningful = [
            line
            for line in body.splitlines()
            if line.strip() and not line.lstrip().startswith("#") and line.strip() != "---"
        ]
        if meaningful:
            out.append((path, body))
    return out


def add_value_arguments(parser: argparse.ArgumentParser) -> None:
    """The value flags of `helm template` and `helm install`."""
    parser.add_argument("-f", "--values", action="append", default=[], help="a values file")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE[,KEY=VALUE]")
    parser.add_argument("--set-string", action="append", default=[], help="values kept as strings")
    parser.add_argument("--set-json", action="append", default=[], help="KEY=JSON")
    parser.add_argument("--set-file", action="append", default=[], help="KEY=PATH (its content)")


def values_from(helm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The values the flags of `add_value_arguments` give, merged in Helm's order."""
    values: dict[str, Any] = {}
    for path in args.values:
        with open(path, encoding="utf-8") as file:
            values = merge(values, helm.values_from_yaml(file.read()))
    for expression in args.set_json:
        values = merge(values, helm.parse_set_json(expression))
    for expression in args.set:
        values = merge(values, helm.parse_set_string(expression))
    for expression in args.set_string:
        values = merge(values, helm.parse_set_string_values(expression))
    for expression in args.set_file:
        values = merge(values, helm.parse_set_file(expression))
    return values


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chart", default=os.path.join(HERE, "operon"), help="the chart directory")
    parser.add_argument("--name", default="operon", help="the release name")
    parser.add_argument("--namespace", default="operon", help="the release namespace")
    add_value_arguments(parser)
    parser.add_argument(
        "--include-crds", action="store_true", help="print the chart's crds/ first"
    )
    parser.add_argument(
        "--lint",
        action="store_true",
        help="run `helm lint --strict` with these values instead; exit 1 on a warning or error",
    )
    args = parser.parse_args(argv)

    try:
        import helm_python as helm
    except ImportError as error:
        print(
            f"render.py: cannot import helm_python ({error}); "
            "install it with: python3 -m pip install helm-python-sdk",
            file=sys.stderr,
        )
        return 2

    try:
        values = values_from(helm, args)

        if args.lint:
            report = helm.lint(args.chart, values, strict=True, namespace=args.namespace)
            problems = [m for m in report["messages"] if m["severity"] >= 2]
            for message in report["messages"]:
                print(f"{message['path']}: {message['error']}")
            for error in report.get("errors") or []:
                print(error)
            return 1 if problems or report.get("errors") else 0

        with helm.Chart.load(args.chart) as chart:
            documents = []
            if args.include_crds:
                documents += [(crd["filename"], crd["data"]) for crd in chart.crds]
            rendered = chart.render(
                values, name=args.name, namespace=args.namespace, is_install=True
            )
            documents += rendered_documents(rendered)
    except (helm.HelmError, OSError) as error:
        print(f"render.py: {error}", file=sys.stderr)
        return 1

    out = sys.stdout
    for source, body in documents:
        out.write(f"---\n# Source: {source}\n")
        out.write(body if body.endswith("\n") else body + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
