"""Where SageMaker writes a container's output in CloudWatch Logs: an endpoint's log group, or an inference
component's own (one stream per instance or copy). One place for both names: deploy's checks, logs, bench, status
and the acceptance alarm's metric filters all read the same groups. The endpoint's name is the one AWS's SageMaker
logging documentation gives; the component's is not cited to an AWS page (docs/hosting.md says where it comes
from)."""


def endpoint_log_group(endpoint: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint}"


def component_log_group(component: str) -> str:
    return f"/aws/sagemaker/InferenceComponents/{component}"
