"""Running Ansible: the playbook runner, its event stream and the variables for the roles."""
