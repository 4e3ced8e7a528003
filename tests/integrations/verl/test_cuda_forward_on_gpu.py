"""A tiny forward and backward on the CUDA device agree with the same computation on the CPU (skipped without CUDA)."""

import torch


def test_linear_forward_and_backward_on_cuda_match_cpu():
    """A small MLP's output and gradients on cuda equal the CPU's within float32 tolerance."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
    inputs = torch.randn(16, 64)

    cpu_out = model(inputs)
    cpu_out.square().mean().backward()
    cpu_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    model_cuda = model.to("cuda")
    cuda_out = model_cuda(inputs.to("cuda"))
    cuda_out.square().mean().backward()

    assert cuda_out.device.type == "cuda"
    torch.testing.assert_close(cuda_out.cpu(), cpu_out, rtol=1e-4, atol=1e-5)
    for grad, expected in zip((p.grad.cpu() for p in model_cuda.parameters()), cpu_grads, strict=True):
        torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-5)
