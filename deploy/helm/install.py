#!/usr/bin/env python3
"""Install (or uninstall) the Operon Helm chart into a cluster with Helm's own code.

For machines without a `helm` binary: the `helm-python-sdk` package (`python3 -m pip
install helm-python-sdk`) bundles Helm v4's Go SDK, which installs the chart as `helm
install` does (the chart's crds/ first, a release Secret in the namespace), and `helm
uninstall` removes it. The values flags are render.py's (`helm template`'s).

    deploy/helm/install.py --kubeconfig ~/.kube/config --set image.repository=REGISTRY/operon
    deploy/helm/install.py --uninstall

Exit status: 0 done, 1 Helm refused or failed, 2 the package is missing.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from render import add_value_arguments, values_from  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chart", default=os.path.join(HERE, "operon"), help="the chart directory")
    parser.add_argument("--name", default="operon", help="the release name")
    parser.add_argument("--namespace", default="operon", help="the release namespace")
    parser.add_argument("--kubeconfig", help="the kubeconfig [default: $KUBECONFIG, ~/.kube/config]")
    parser.add_argument(
        "--timeout", type=int, default=300, help="seconds to wait for the release's objects"
    )
    parser.add_argument("--uninstall", action="store_true", help="remove the release instead")
    add_value_arguments(parser)
    args = parser.parse_args(argv)

    try:
        import helm_python as helm
    except ImportError as error:
        print(
            f"install.py: cannot import helm_python ({error}); "
            "install it with: python3 -m pip install helm-python-sdk",
            file=sys.stderr,
        )
        return 2

    try:
        with helm.Config(kubeconfig_path=args.kubeconfig, namespace=args.namespace) as config:
            if args.uninstall:
                config.uninstall(args.name, timeout=args.timeout, wait="watcher")
                print(f"uninstalled {args.name} from {args.namespace}")
                return 0
            with helm.Chart.load(args.chart) as chart:
                release = config.install(
                    chart,
                    args.name,
                    values_from(helm, args),
                    namespace=args.namespace,
                    create_namespace=True,
                    timeout=args.timeout,
                    wait="watcher",
                )
            print(f"installed {args.name} in {args.namespace}: {release.get('status')}")
    except (helm.HelmError, OSError) as error:
        print(f"install.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
