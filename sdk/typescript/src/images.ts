// Images boxd stores (`images`): list, import, remove, build from a
// Dockerfile, pull from and push to OCI registries, and warm-pool sizes.
//
//   import { images } from "@boxd/sdk";
//   await images.importImage(tarBytes, { name: "work/app:v1", rootfs: true });
//   await images.pull("registry.example:5000/team/app:v2", { auth: { username, password } });
//
// Tar data (imports, build contexts) streams in 1 MiB messages.

import { create } from "@bufbuild/protobuf";
import { defaultClient, type CallOpts, type Client } from "./client.js";
import { chunks } from "./files.js";
import {
  BuildImageRequestSchema,
  ImageFormat,
  ImportImageRequestSchema,
  ListImagesRequestSchema,
  RemoveImageRequestSchema,
  type BuildImageRequest,
  type ImportImageRequest,
} from "./gen/boxd/v1/boxd_pb.js";
import { ListPoolsRequestSchema, SetPoolSizeRequestSchema } from "./gen/boxd/v1/pool_pb.js";
import { PullImageRequestSchema, PushImageRequestSchema } from "./gen/boxd/v1/registry_pb.js";
import { Unavailable } from "./errors.js";
import type { ByteSource } from "./process.js";
import { registryAuth, type RegistryAuth } from "./sandbox.js";
import { buildResult, image, pool, transferProgress, type BuildResult, type Image, type Pool, type TransferProgress } from "./types.js";

type Opts = CallOpts & { client?: Client };

/** Every image boxd stores. */
export async function list(o: Opts = {}): Promise<Image[]> {
  const c = o.client ?? defaultClient();
  return (await c.unary((opts) => c.sandbox.listImages(create(ListImagesRequestSchema, {}), opts), o)).images.map(image);
}

/**
 * Imports an OCI-layout or docker-archive tar, or with rootfs a tar of a
 * root filesystem (then name is required). force replaces an image of the
 * same name (else AlreadyExists). Returns the images written.
 */
export async function importImage(data: ByteSource, o: Opts & { name?: string; rootfs?: boolean; force?: boolean } = {}): Promise<Image[]> {
  const c = o.client ?? defaultClient();
  async function* requests(): AsyncGenerator<ImportImageRequest> {
    yield create(ImportImageRequestSchema, {
      name: o.name ?? "",
      format: o.rootfs ? ImageFormat.ROOTFS : ImageFormat.TAR,
      force: o.force ?? false,
    });
    for await (const b of chunks(data)) yield create(ImportImageRequestSchema, { data: b });
  }
  return (await c.unary((opts) => c.sandbox.importImage(requests(), opts), o)).images.map(image);
}

/** Removes an image; one that sandboxes use only with force (else FailedPrecondition naming them). */
export async function remove(name: string, o: Opts & { force?: boolean } = {}): Promise<void> {
  const c = o.client ?? defaultClient();
  await c.unary((opts) => c.sandbox.removeImage(create(RemoveImageRequestSchema, { name, force: o.force ?? false }), opts), o);
}

export interface BuildOptions extends Opts {
  /** The build context as tar bytes (or a stream of them); unset: none. */
  context?: ByteSource;
  buildArgs?: Record<string, string>;
  /** Replace an image under ref. */
  force?: boolean;
  /** Run every step again. */
  noCache?: boolean;
}

/**
 * Builds an image named ref from a Dockerfile: each RUN, COPY and ADD
 * becomes a layer, cached by step and inputs. Errors name the Dockerfile
 * line (a failed RUN is FailedPrecondition with its exit code and output).
 */
export async function build(ref: string, dockerfile: string | Uint8Array, o: BuildOptions = {}): Promise<BuildResult> {
  const c = o.client ?? defaultClient();
  async function* requests(): AsyncGenerator<BuildImageRequest> {
    yield create(BuildImageRequestSchema, {
      ref,
      dockerfile: typeof dockerfile === "string" ? new TextEncoder().encode(dockerfile) : dockerfile,
      buildArgs: { ...(o.buildArgs ?? {}) },
      force: o.force ?? false,
      noCache: o.noCache ?? false,
    });
    if (o.context !== undefined) for await (const b of chunks(o.context)) yield create(BuildImageRequestSchema, { context: b });
  }
  return buildResult(await c.unary((opts) => c.sandbox.buildImage(requests(), opts), o));
}

export interface TransferOptions extends Opts {
  /** Credentials for the reference's registry only (never stored). */
  auth?: RegistryAuth;
  /** Called with the progress at most every 100 ms. */
  onProgress?: (p: TransferProgress) => void;
}

/**
 * Pulls HOST[:PORT]/PATH[:TAG][@DIGEST] and stores it under that name.
 * force replaces a local image of the name with another digest.
 */
export async function pull(reference: string, o: TransferOptions & { platform?: string; force?: boolean } = {}): Promise<Image> {
  const c = o.client ?? defaultClient();
  const req = create(PullImageRequestSchema, { reference, platform: o.platform ?? "", auth: registryAuth(o.auth), force: o.force ?? false });
  for await (const msg of c.stream((opts) => c.registry.pullImage(req, opts), o)) {
    if (msg.msg.case === "image") return image(msg.msg.value);
    if (msg.msg.case === "progress") o.onProgress?.(transferProgress(msg.msg.value));
  }
  throw new Unavailable(`boxd ended the pull of ${reference} without an image`);
}

/** Pushes the local image source (default: reference) to reference's registry; returns the digest pushed. */
export async function push(reference: string, o: TransferOptions & { source?: string } = {}): Promise<string> {
  const c = o.client ?? defaultClient();
  const req = create(PushImageRequestSchema, { reference, source: o.source ?? "", auth: registryAuth(o.auth) });
  for await (const msg of c.stream((opts) => c.registry.pushImage(req, opts), o)) {
    if (msg.msg.case === "digest") return msg.msg.value;
    if (msg.msg.case === "progress") o.onProgress?.(transferProgress(msg.msg.value));
  }
  throw new Unavailable(`boxd ended the push of ${reference} without a digest`);
}

/** Every image's warm pool: target, ready and starting members. */
export async function poolSizes(o: Opts = {}): Promise<Pool[]> {
  const c = o.client ?? defaultClient();
  return (await c.unary((opts) => c.pool.listPools(create(ListPoolsRequestSchema, {}), opts), o)).pools.map(pool);
}

/**
 * Sets an image's warm-pool target (admins only; 0 empties it; until boxd restarts). "": the default image.
 * runtime: the members' ("runc", the default, or "gvisor"); each image has a pool per runtime.
 */
export async function setPoolSize(imageName: string, size: number, o: Opts & { runtime?: string } = {}): Promise<Pool> {
  const c = o.client ?? defaultClient();
  const req = create(SetPoolSizeRequestSchema, { image: imageName, size, runtime: o.runtime ?? "" });
  return pool((await c.unary((opts) => c.pool.setPoolSize(req, opts), o)).pool);
}
