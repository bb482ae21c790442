"""Packages of the wheel; everything else is declared in pyproject.toml.

Only what pyproject.toml cannot say: the top-level notebooks/ folder becomes the data-only
package ``climnb.notebooks``, so the numbered notebooks are installed with climnb while the
repository keeps them where people look for them.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["climnb", "climnb.*"]), "climnb.notebooks"],
    package_dir={"climnb.notebooks": "notebooks"},
)
