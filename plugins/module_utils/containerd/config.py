"""containerd config.toml editing: the pure logic behind the ``containerd_config`` action (the entry point).

This file runs on the CONTROLLER only (it imports tomlkit, which nodes do not
need): plugins/action/containerd_config.py imports it by its package path. No module may
import it.

Every change goes through the project's merge engine (config_merge.merge_into)
into a tomlkit document, so comments and the layout of everything we do not
touch survive; only new items are laid out (indentation and blank lines copied
from the file's own style).

The logic lives in four parts, by subject, loaded here in order (each part reads the earlier ones' names);
importers use this file's names only:

- parse.py: constants, Request/Outcome, parsing, a file's config version (the versions' facts: versions.py);
- changes.py: the changes a request makes (runtime table, NVIDIA's default, options);
- plans.py: the layout of new items, the in-place and drop-in plans;
- reading.py: the daemon's reading (``config dump``) checked against the plan.

Tables per config version, and which containerd writes which: containerd/versions.py (CRI_TABLES and its
docstring's table).

A file without a ``version`` key is version 1; an empty file (nothing but
comments and blank lines) counts as the version the node's containerd writes
(containerd_versions.config_version_for: 2, 3 from containerd 2.0, 4 from 2.3).

Version 4 (containerd v2.3.4, commit db8809540e1a7a9da5d518876894933ff55692ab):

- The CRI tables keep version 3's names: ``containerd config default`` of 2.3.4 writes
  ``plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc`` (the build and its output in
  shared/upstream/containerd, config-default-v4.toml), and plugins/cri/runtime/plugin.go registers the same
  plugin (type io.containerd.cri.v1, id runtime). What version 4 moves are the server properties:
  cmd/containerd/server/config/config.go ``serviceMigrate`` takes the top-level ``grpc``, ``ttrpc``, ``debug``
  and ``metrics`` tables of a version 3 file to the plugins ``io.containerd.server.v1.{grpc,grpc-tcp,ttrpc,
  debug,metrics}`` and ``io.containerd.metrics.v1.grpc-prometheus`` (SERVICE_PLUGINS below).
- Every file (root and each import) is migrated on its own, in memory, before it is merged
  (``LoadConfigWithPlugins``); the CRI plugins' ``ConfigMigration`` (plugins/cri/runtime/plugin.go and
  plugins/cri/cri.go) moves a version 2 file's ``io.containerd.grpc.v1.cri`` settings to
  ``io.containerd.cri.v1.runtime`` (images settings to ``io.containerd.cri.v1.images``). So ``config dump`` of
  2.3 prints version 4 with ``io.containerd.cri.v1.*`` tables whatever the files say: the daemon-verified
  reading (verify_reading) reads the dump by the dump's version, the edit writes the file's own version.
- ``imports``: relative to the importing file, globbed (``resolveImports``); the default config imports
  ``/etc/containerd/conf.d/*.toml``, and the dump lists that pattern in ``imports`` even where no file imports it
  (cmd/containerd/command/config.go, ``platformAgnosticDefaultConfig``).
- A drop-in must not carry a higher version than its root file on disk: 2.3 refuses to start
  (containerd_versions.py). method=dropin writes the root file's own version into the drop-in.
"""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import changes as _changes
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import parse as _parse
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import plans as _plans
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import reading as _reading
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions

# parse
DEFAULT_PATH = _parse.DEFAULT_PATH
DEFAULT_DROPIN_DIR = _parse.DEFAULT_DROPIN_DIR
DEFAULT_RUNTIME_TYPE = _parse.DEFAULT_RUNTIME_TYPE
CRI_TABLES = containerd_versions.CRI_TABLES
SERVICE_PLUGINS = _parse.SERVICE_PLUGINS
DROPIN_MIN_CONTAINERD = _parse.DROPIN_MIN_CONTAINERD
DROPIN_HEADER = _parse.DROPIN_HEADER
ContainerdConfigError = _parse.ContainerdConfigError
TablePaths = _parse.TablePaths
Request = _parse.Request
Outcome = _parse.Outcome
undot_tables = _parse.undot_tables
parse_document = _parse.parse_document
config_version = _parse.config_version
table_paths = _parse.table_paths
dotted_key = _parse.dotted_key
check_dropin_allowed = _parse.check_dropin_allowed
empty_version_for = _parse.empty_version_for
default_dropin_path = _parse.default_dropin_path

# changes
nvidia_default = _changes.nvidia_default
keep_nvidia_default = _changes.keep_nvidia_default
nvidia_summary = _changes.nvidia_summary
option_keys = _changes.option_keys
option_value = _changes.option_value
fold_options = _changes.fold_options
drop_option_variants = _changes.drop_option_variants
runtime_reading = _changes.runtime_reading
check_effective = _changes.check_effective
build_changes = _changes.build_changes

# plans
plan_inplace = _plans.plan_inplace
ensure_import = _plans.ensure_import
render_dropin = _plans.render_dropin
plan_dropin = _plans.plan_dropin

# reading
reading_as = _reading.reading_as
stage_imports = _reading.stage_imports
unstage_reading = _reading.unstage_reading
verify_reading = _reading.verify_reading

__all__ = [
    "CRI_TABLES",
    "DEFAULT_PATH",
    "DEFAULT_RUNTIME_TYPE",
    "ContainerdConfigError",
    "Outcome",
    "Request",
    "TablePaths",
    "build_changes",
    "check_dropin_allowed",
    "check_effective",
    "config_version",
    "default_dropin_path",
    "dotted_key",
    "empty_version_for",
    "ensure_import",
    "parse_document",
    "plan_dropin",
    "plan_inplace",
    "render_dropin",
    "table_paths",
    "verify_reading",
]
