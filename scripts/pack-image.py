#!/usr/bin/env python3
"""Packs static binaries into a one-layer container image, FROM scratch, with no daemon and no
registry: the output is a docker-archive tarball (the format of `docker save`), which
`docker load`, `ctr images import`, `kind load image-archive` and podman all read.

The build is reproducible: entries are sorted, owned by 0:0 and dated SOURCE_DATE_EPOCH
(default 0), so the same binaries always give the same image ID.

    pack-image.py --tag strata-node:0.1.0 --file target/.../strata-node:/strata-node \
        --entrypoint /strata-node --user 65532:65532 --expose 6379 --expose 9121 -o out.tar
"""

import argparse
import datetime
import hashlib
import io
import json
import os
import sys
import tarfile


def tar_bytes(members):
    """A tar archive (bytes) of (TarInfo, data-or-None) pairs, in the given order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def entry(name, mtime, mode, data=None, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if data is not None:
        info.size = len(data)
    return info, data


def layer(files, mtime):
    """The root filesystem layer: parent directories, the files, and an empty /tmp."""
    members, dirs = [], {"tmp"}
    for _, dest, _ in files:
        parts = dest.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    for d in sorted(dirs):
        mode = 0o1777 if d == "tmp" else 0o755
        members.append(entry(d + "/", mtime, mode, kind=tarfile.DIRTYPE))
    for src, dest, mode in sorted(files, key=lambda f: f[1]):
        with open(src, "rb") as f:
            members.append(entry(dest.strip("/"), mtime, mode, f.read()))
    return tar_bytes(members)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tag", required=True, action="append", help="name:tag (repeatable); never 'latest'")
    p.add_argument("--file", required=True, action="append", help="SRC:DEST[:MODE] (MODE octal, default 755)")
    p.add_argument("--entrypoint", required=True, help="absolute path of the program to run")
    p.add_argument("--cmd", action="append", default=[], help="default argument (repeatable)")
    p.add_argument("--user", default="65532:65532", help="uid:gid the container runs as")
    p.add_argument("--expose", action="append", default=[], help="TCP port (repeatable)")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE (repeatable)")
    p.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeatable)")
    p.add_argument("--arch", default="amd64", help="image architecture (amd64, arm64)")
    p.add_argument("-o", "--output", required=True, help="where to write the docker-archive tarball")
    args = p.parse_args()

    for tag in args.tag:
        name, _, version = tag.rpartition(":")
        if not name or not version or version == "latest" or "/" in version:
            sys.exit(f"pack-image: tag {tag!r} must be name:version and the version must not be 'latest'")
    files = []
    for spec in args.file:
        parts = spec.split(":")
        if len(parts) not in (2, 3) or not parts[1].startswith("/"):
            sys.exit(f"pack-image: --file {spec!r}: expected SRC:/DEST[:MODE]")
        if not os.path.isfile(parts[0]):
            sys.exit(f"pack-image: {parts[0]}: no such file (build it first)")
        files.append((parts[0], parts[1], int(parts[2], 8) if len(parts) == 3 else 0o755))
    if not any(dest == args.entrypoint for _, dest, _ in files):
        sys.exit(f"pack-image: the entrypoint {args.entrypoint} is not among the --file destinations")

    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    layer_tar = layer(files, mtime)
    diff_id = "sha256:" + sha256(layer_tar)
    config = {
        "architecture": args.arch,
        "os": "linux",
        "created": created,
        "config": {
            "User": args.user,
            "Entrypoint": [args.entrypoint],
            "Cmd": args.cmd or None,
            "Env": args.env or ["PATH=/"],
            "ExposedPorts": {f"{port}/tcp": {} for port in args.expose} or None,
            "WorkingDir": "/",
            "Labels": dict(kv.split("=", 1) for kv in args.label) or None,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "strata scripts/pack-image.py"}],
    }
    config["config"] = {k: v for k, v in config["config"].items() if v is not None}
    config_json = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = sha256(config_json) + ".json"
    layer_name = diff_id.split(":")[1] + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": args.tag, "Layers": [layer_name]}]
    repositories = {}
    for tag in args.tag:
        name, _, version = tag.rpartition(":")
        repositories.setdefault(name, {})[version] = diff_id.split(":")[1]

    archive = tar_bytes([
        entry(config_name, mtime, 0o644, config_json),
        entry(diff_id.split(":")[1] + "/", mtime, 0o755, kind=tarfile.DIRTYPE),
        entry(layer_name, mtime, 0o644, layer_tar),
        entry("manifest.json", mtime, 0o644, json.dumps(manifest, separators=(",", ":")).encode()),
        entry("repositories", mtime, 0o644, json.dumps(repositories, separators=(",", ":")).encode()),
    ])
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "wb") as f:
        f.write(archive)
    os.replace(tmp, args.output)
    print(f"pack-image: {', '.join(args.tag)} -> {args.output} "
          f"(image id sha256:{config_name[:-5][:12]}, {len(layer_tar) / 1e6:.1f} MB layer)")


if __name__ == "__main__":
    main()
