"""What the FUSE-pod tests run inside a container (molecule fuse_security and kubelet).

MOUNT_AND_READ is what a FUSE pod does: a real bindfs mount, read back. ESCAPE is
what such a pod must not be able to do: write a host-wide kernel setting
(kernel.threads-max) or unmask /proc/sys (runc mounts it read-only). It writes
back the value it read, so a pod that can write changes nothing on the host;
it prints WROTE-THREADS-MAX or UNMASKED-PROC-SYS for what succeeded.
"""

MOUNT_AND_READ = "mkdir -p /src /mnt/b && echo hello-through-fuse > /src/file && bindfs /src /mnt/b && cat /mnt/b/file"
ESCAPE = (
    "v=$(cat /proc/sys/kernel/threads-max); "
    "if echo $v > /proc/sys/kernel/threads-max; then echo WROTE-THREADS-MAX; fi; "
    "if umount /proc/sys; then echo UNMASKED-PROC-SYS; fi; "
    "if echo $v > /proc/sys/kernel/threads-max; then echo WROTE-THREADS-MAX; fi"
)
