// Image bytes and refs: what a host needs to upload an image by itself and
// to recognise the ref blocks durachat puts in its place. Only web
// platform APIs (Web Crypto, btoa/atob), so the package runs wherever
// fetch does.

import type { Block, TextBlock, UploadInput } from "./types.js";

const refText = /^\[image ([0-9a-f]{16})\]$/;

/** The ref block of an image name: what a host sends in place of an uploaded image. */
export function refBlock(name: string): TextBlock {
  return { type: "text", text: `[image ${name}]` };
}

/** The image name of a ref block (a text block whose whole text is "[image <16 hex digits>]"), else undefined. */
export function refName(block: Block | { type: string; text?: unknown }): string | undefined {
  if (block?.type !== "text" || typeof block.text !== "string") return undefined;
  return refText.exec(block.text)?.[1];
}

/** The names of the ref blocks of content, in order. */
export function refs(content: readonly Block[] | string): string[] {
  if (typeof content === "string") return [];
  return content.map(refName).filter((n): n is string => n !== undefined);
}

/** Standard base64 of bytes. */
export function toBase64(data: Uint8Array): string {
  let s = "";
  const chunk = 0x8000;
  for (let i = 0; i < data.length; i += chunk) {
    s += String.fromCharCode(...data.subarray(i, i + chunk));
  }
  return btoa(s);
}

/** The bytes of standard base64; throws on anything else. */
export function fromBase64(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function hex(buf: ArrayBuffer): string {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

export async function sha256(data: Uint8Array): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>));
}

/** The type of image bytes, read from them as the server does; undefined for none it stores. */
export function imageType(data: Uint8Array): UploadInput["type"] | undefined {
  const at = (sig: number[], offset = 0) => sig.every((b, i) => data[offset + i] === b);
  const ascii = (s: string) => Array.from(s, (c) => c.charCodeAt(0));
  if (at([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (at([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (at(ascii("GIF87a")) || at(ascii("GIF89a"))) return "image/gif";
  if (at(ascii("RIFF")) && at(ascii("WEBPVP"), 8)) return "image/webp";
  return undefined;
}

/**
 * What the upload route needs to know of image bytes: the name they get
 * inline (the first 16 hex digits of the SHA-256 of their standard base64),
 * their size, type and SHA-256. Bytes of a type the server does not store
 * get the type given (or application/octet-stream), which it refuses by name.
 */
export async function describeImage(data: Uint8Array, mimeType?: string): Promise<UploadInput> {
  const b64 = new TextEncoder().encode(toBase64(data));
  return {
    name: (await sha256(b64)).slice(0, 16),
    size: data.length,
    type: imageType(data) ?? ((mimeType ?? "application/octet-stream") as UploadInput["type"]),
    sha256: await sha256(data),
  };
}
