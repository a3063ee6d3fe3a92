#!/usr/bin/python3
"""Train a few steps on batches that feedfs staged in GPU memory.

  examples/cuda_tensor.py MOUNT [--job train] [--epoch 0] [--steps 5]

The job must have `gpu = on` (feedfs built --with-cuda, a device present).
Each step opens epoch-NNNN/batch-NNNNNN.cuda: reading it makes feedfs stage
the batch on the device (uint8 over PCIe, converted and normalized there)
and returns a 160-byte descriptor (feedfs(8), gpu/feedfs_cuda.h).  The
descriptor's cudaIpcMemHandle_t names feedfs's device pool: it is opened
once with cudaIpcOpenMemHandle (through ctypes: torch has no public API for
it), and each batch is that pointer plus the descriptor's offset, wrapped as
a tensor through __cuda_array_interface__ without a copy.  The bytes are
valid while the .cuda file is open, so the file is closed only after the
step that used them.
"""
import argparse, ctypes, ctypes.util, json, os, struct, sys, uuid

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


class Pool:
    """feedfs's device pool, opened once per process."""

    def __init__(self, torch):
        self.torch, self.cudart, self.base, self.handle = torch, None, None, None

    def pointer(self, d):
        if self.base is None:
            torch = self.torch
            dev = d["device"]
            for i in range(torch.cuda.device_count()):  # ordinals differ
                u = getattr(torch.cuda.get_device_properties(i), "uuid", None)
                if u is not None and str(u).replace("GPU-", "") == str(d["uuid"]):
                    dev = i
                    break
            torch.cuda.set_device(dev)
            torch.cuda.init()
            self.cudart = load_cudart()
            self.cudart.cudaSetDevice(ctypes.c_int(dev))
            self.cudart.cudaGetErrorString.restype = ctypes.c_char_p
            ptr = ctypes.c_void_p()
            h = IpcHandle.from_buffer_copy(d["handle"])  # NULs kept
            err = self.cudart.cudaIpcOpenMemHandle(
                ctypes.byref(ptr), h, ctypes.c_uint(1))  # LazyEnablePeerAccess
            if err != 0:
                fail("cudaIpcOpenMemHandle: %s" %
                     self.cudart.cudaGetErrorString(err).decode())
            self.base, self.handle, self.device = ptr.value, d["handle"], dev
        elif d["handle"] != self.handle:
            fail("the pool's handle changed: feedfs was remounted")
        return self.base + d["offset"]

    def close(self):
        if self.base is not None:
            self.cudart.cudaIpcCloseMemHandle(ctypes.c_void_p(self.base))
            self.base = None


class DeviceArray:
    """Device memory described for torch.as_tensor: no copy is made."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
            "strides": None, "version": 3,
            "stream": None,  # feedfs synchronized before answering the read
        }


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
    pool = Pool(torch)
    for step in range(a.steps):
        path = os.path.join(d, "batch-%06d.cuda" % step)
        if not os.path.exists(path):
            break
        with open(path, "rb", buffering=0) as f:  # held: the bytes stay
            desc = decode(f.read(DESC.size))
            ptr = pool.pointer(desc)
            x = torch.as_tensor(
                DeviceArray(ptr, desc["shape"], TYPESTR[desc["dtype"]]),
                device="cuda:%d" % pool.device)
            assert x.data_ptr() == ptr, "torch copied the batch"
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
            torch.cuda.synchronize()  # done with x before the file closes
        print("step %d: batch %s, loss %.4f" %
              (step, tuple(desc["shape"]), loss.item()))
    pool.close()


if __name__ == "__main__":
    main()
