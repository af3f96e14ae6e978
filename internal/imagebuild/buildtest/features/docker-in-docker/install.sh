#!/bin/sh
# Not the real install.sh (it installs Docker): the build must refuse this feature before running it.
echo "docker-in-docker install.sh must not run" >&2
exit 1
