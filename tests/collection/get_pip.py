"""Stand-in for the pip bootstrap script ansible-test downloads (get-pip.py, from
ci-files.testing.ansible.com) into an environment it made without pip: pip from the interpreter's
own ensurepip, then what ansible-test asks for (``pip==VERSION``) from the configured package index.
test_collection.py puts it where ansible-test looks for its cached copy."""

import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
wanted = [argument for argument in sys.argv[1:] if argument not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", *wanted])
