#!/usr/bin/python3
"""Train a few steps on batches that feedfs staged in GPU memory.

  examples/cuda_tensor.py MOUNT [--job train] [--epoch 0] [--steps 5]

The job must have `gpu = on` (feedfs built --with-cuda, a device present).
Each step opens epoch-NNNN/batch-NNNNNN.cuda: reading it makes feedfs stage
the batch on the device (uint8 over PCIe, converted and normalized there)
and returns a 160-byte descriptor (feedfs(8), gpu/feedfs_cuda.h).  The
descriptor's cudaIpcMemHandle_t names the device pool of the job: it is
opened once per job with cudaIpcOpenMemHandle (through ctypes: torch has no
public API for it), and each batch is that pointer plus the descriptor's
offset, wrapped as a tensor through __cuda_array_interface__ without a copy.

THE TENSOR IS VALID ONLY WHILE THE .cuda FILE IS OPEN.  Closing the file
gives the device buffer back to feedfs, which stages the next batch into
it, under a tensor that still points there.  So:

  RIGHT: the file stays open for as long as the tensor is used
      with staged_batch(path, pools) as (x, desc):  # opens, reads, wraps
          loss = model(x); loss.backward(); opt.step()
      # closed here (after a torch.cuda.synchronize()): x is dead now
  RIGHT: a copy that must outlive the file
      with staged_batch(path, pools) as (x, desc):
          keep = x.clone()                   # owned by torch

  WRONG: the file object is closed as soon as the line ends
      x = tensor_from(open(path, "rb").read())      # DO NOT
  WRONG: the tensor escapes the with block
      with staged_batch(path, pools) as (x, desc):
          pass
      model(x)                                      # DO NOT
"""
import argparse, contextlib, ctypes, ctypes.util, json, os, struct, sys
import uuid

DESC = struct.Struct("<8sII64siIQQII4Q16s")  # 160 bytes, little-endian
assert DESC.size == 160
TYPESTR = {0: "|u1", 1: "<f2", 2: "<f4"}


def fail(msg):
    sys.stderr.write("cuda_tensor.py: %s\n" % msg)
    sys.exit(1)


def decode(buf):
    """The fields of a .cuda descriptor, checked as feedfs_cuda_decode does."""
    if len(buf) < DESC.size:
        raise ValueError("short descriptor (%d bytes)" % len(buf))
    (magic, version, size, handle, device, dtype, offset, nbytes, ndim,
     layout, s0, s1, s2, s3, dev_uuid) = DESC.unpack_from(buf)
    if magic != b"FFSCUDA\0" or size != DESC.size:
        raise ValueError("not a feedfs .cuda descriptor")
    if version != 1:
        raise ValueError("descriptor version %d is not known" % version)
    if dtype not in TYPESTR or not 1 <= ndim <= 4:
        raise ValueError("bad dtype or ndim")
    shape = (s0, s1, s2, s3)[:ndim]
    return dict(handle=handle, device=device, dtype=dtype, offset=offset,
                nbytes=nbytes, shape=shape, layout=layout,
                uuid=uuid.UUID(bytes=dev_uuid))


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def load_cudart():
    """libcudart, preferring the one torch already loaded."""
    names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12",
             "libcudart.so.11.0"]
    found = ctypes.util.find_library("cudart")
    if found:
        names.insert(0, found)
    try:  # pip wheels ship it under nvidia/cuda_runtime/lib
        import nvidia.cuda_runtime, glob
        for d in nvidia.cuda_runtime.__path__:
            names[:0] = glob.glob(os.path.join(d, "lib", "libcudart.so*"))
    except ImportError:
        pass
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    fail("libcudart not found (tried %s)" % ", ".join(names))


class Pools:
    """The device pools of feedfs's jobs, each opened once per process."""

    def __init__(self, torch):
        self.torch, self.cudart, self.device = torch, None, None
        self.base = {}  # IPC handle bytes -> device pointer

    def pointer(self, d):
        """The device address of the batch of descriptor d."""
        if d["handle"] not in self.base:
            torch = self.torch
            dev = d["device"]
            for i in range(torch.cuda.device_count()):  # ordinals differ
                u = getattr(torch.cuda.get_device_properties(i), "uuid", None)
                if u is not None and str(u).replace("GPU-", "") == str(d["uuid"]):
                    dev = i
                    break
            torch.cuda.set_device(dev)
            torch.cuda.init()
            if self.cudart is None:
                self.cudart = load_cudart()
                self.cudart.cudaGetErrorString.restype = ctypes.c_char_p
            err = self.cudart.cudaSetDevice(ctypes.c_int(dev))
            if err != 0:
                fail("cudaSetDevice(%d): %s" % (
                    dev, self.cudart.cudaGetErrorString(err).decode()))
            ptr = ctypes.c_void_p()
            h = IpcHandle.from_buffer_copy(d["handle"])  # NULs kept
            err = self.cudart.cudaIpcOpenMemHandle(
                ctypes.byref(ptr), h, ctypes.c_uint(1))  # LazyEnablePeerAccess
            if err != 0:
                fail("cudaIpcOpenMemHandle: %s" %
                     self.cudart.cudaGetErrorString(err).decode())
            self.base[d["handle"]], self.device = ptr.value, dev
        return self.base[d["handle"]] + d["offset"]

    def close(self):
        for base in self.base.values():
            self.cudart.cudaIpcCloseMemHandle(ctypes.c_void_p(base))
        self.base = {}


class DeviceArray:
    """Device memory described for torch.as_tensor: no copy is made."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
            "strides": None, "version": 3,
            "stream": None,  # feedfs synchronized before answering the read
        }


@contextlib.contextmanager
def staged_batch(path, pools):
    """Yield the batch of a .cuda file as a CUDA tensor, without a copy.

    The file stays open, and so the tensor valid, until the with block
    ends; then the device is synchronized and the file closed, and the
    tensor must not be used again (clone() it inside the block to keep
    it).  Yields (tensor, descriptor).
    """
    torch = pools.torch
    with open(path, "rb", buffering=0) as f:  # held: the bytes stay
        desc = decode(f.read(DESC.size))
        ptr = pools.pointer(desc)
        x = torch.as_tensor(
            DeviceArray(ptr, desc["shape"], TYPESTR[desc["dtype"]]),
            device="cuda:%d" % pools.device)
        assert x.data_ptr() == ptr, "torch copied the batch"
        try:
            yield x, desc
        finally:
            torch.cuda.synchronize()  # no kernel may still read x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mount")
    ap.add_argument("--job", default="train")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()

    try:
        import numpy as np
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        fail("needs numpy and torch: %s" % e)
    if not torch.cuda.is_available():
        fail("no CUDA device visible to torch: the .cuda files need one")
    job = os.path.join(a.mount, a.job)
    try:
        with open(os.path.join(job, "info.json")) as f:
            info = json.load(f)
    except OSError as e:
        fail("%s: %s (is feedfs mounted there?)" % (job, e))
    d = os.path.join(job, "epoch-%04d" % a.epoch)
    if not os.path.exists(os.path.join(d, "batch-000000.cuda")):
        fail("%s has no .cuda files: set gpu = on in the job" % d)

    classes = info.get("classes", 1000)
    if isinstance(classes, list):
        classes = len(classes)
    model = nn.Sequential(
        nn.LazyConv2d(16, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LazyLinear(classes)).cuda()
    opt = None
    pools = Pools(torch)
    for step in range(a.steps):
        path = os.path.join(d, "batch-%06d.cuda" % step)
        if not os.path.exists(path):
            break
        with staged_batch(path, pools) as (x, desc):  # x dies at the end
            if desc["layout"] == 0:  # NHWC: the model wants NCHW
                x = x.permute(0, 3, 1, 2)
            x = x.float()
            y = torch.from_numpy(np.load(path[:-5] + ".labels.npy")).cuda()
            loss = F.cross_entropy(model(x), y % classes)
            if opt is None:
                opt = torch.optim.SGD(model.parameters(), lr=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("step %d: batch %s, loss %.4f" %
              (step, tuple(desc["shape"]), loss.item()))
    pools.close()


if __name__ == "__main__":
    main()
