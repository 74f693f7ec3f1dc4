"""Package layout: one import namespace, three folders.

colbench/ holds the domain code. store/, cli/ and migrations/ sit beside it in the
repository but install as colbench.store, colbench.cli and colbench.migrations, in
editable and wheel installs alike. Nothing named `store` or `cli` is ever installed.
"""
from setuptools import find_namespace_packages, setup

MAPPED = {"colbench.store": "store", "colbench.cli": "cli", "colbench.migrations": "migrations"}


def packages_under(name: str, folder: str) -> list[str]:
    found = find_namespace_packages(folder, exclude=["*__pycache__*"])
    return [name] + [f"{name}.{sub}" for sub in found]


packages = packages_under("colbench", "colbench")
for name, folder in MAPPED.items():
    packages += packages_under(name, folder)

setup(packages=packages, package_dir={"colbench": "colbench", **MAPPED})
