# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
name: role_template
short_description: A role's template file rendered to a string, without a copy of every variable
description:
  - Renders each template file named, found as C(ansible.builtin.template)'s lookup finds it (the role's
    C(templates/) first), with the same variables and the same template variables (C(ansible_managed), C(template_path)
    and the others), and returns the rendered strings.
  - ansible-core 2.19's C(template) lookup deep-copies every variable of the host for each file it renders
    (C(ansible/plugins/lookup/template.py) copies C(variables) before it adds the template variables). That is about
    0.1 s of controller CPU a file on a no-op re-run of site.yml, where the roles render their files to compare them
    with the node's (issue 47). This lookup layers the template variables over the host's variables instead, changing
    none of them.
  - C(ansible.template.generate_ansible_template_vars), which gives the template variables, is marked for removal in
    ansible-core 2.23; the unit test compares this lookup with the builtin one and fails first.
  - The roles' vars files render every file they compare with the node through it.
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  _terms:
    description: The template files, relative to the role's C(templates/) or the play's search path.
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
__fuse_modules_load_content: "{{ lookup('gpunode.provisioning.role_template', 'etc/modules-load.d/fuse.conf.j2') }}"
"""

RETURN = r"""
_raw:
  description: The rendered files, one string each.
  type: list
  elements: str
"""

import os
from collections import ChainMap

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.template import generate_ansible_template_vars, trust_as_template


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        self.set_options(var_options=variables, direct=kwargs)
        rendered = []
        for term in terms:
            found = self.find_file_in_search_path(variables, "templates", term)
            if not found:
                raise AnsibleError(f"role_template: the template file {term} could not be found")
            text = trust_as_template(self._loader.get_text_file_contents(found))
            # jinja includes: the file's directory, then each search path's templates/ and the path itself
            searchpath = [os.path.dirname(found)]
            for path in variables.get("ansible_search_path", []):
                searchpath += [os.path.join(path, "templates"), path]
            template_vars = generate_ansible_template_vars(path=term, fullpath=found)
            if "ansible_managed" in variables:  # a user's ansible_managed wins, as with the template lookup
                template_vars.pop("ansible_managed", None)
            templar = self._templar.copy_with_new_env(
                available_variables=ChainMap(template_vars, variables), searchpath=searchpath
            )
            rendered.append(templar.template(text, escape_backslashes=False))
        return rendered
