"""OSWorld desktops: OSWorld's own client and evaluators over VM providers or our `local` Xvfb desktop."""

VM_PROVIDERS = ("docker", "vmware", "virtualbox", "aws", "azure", "gcp", "aliyun", "volcengine")  # desktop-env's
PROVIDERS = ("local", *VM_PROVIDERS)
