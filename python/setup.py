"""Installs prescient-follow.pth beside the package: Python's site module runs
it at start-up, which is how PRESCIENT_FOLLOW=1 works without a code change
(it does nothing unless the variable is set)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithStartupHook(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        self.copy_file(os.path.join(here, "prescient-follow.pth"),
                       os.path.join(self.build_lib, "prescient-follow.pth"))


setup(cmdclass={"build_py": BuildWithStartupHook})
