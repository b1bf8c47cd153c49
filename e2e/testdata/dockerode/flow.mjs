// A sandbox wrapper's flow with dockerode, against boxd's Docker endpoint:
// node flow.mjs SOCKET IMAGE prints {"ok":true} or fails.
import Docker from 'dockerode';
import { PassThrough } from 'node:stream';

const [sock, image] = process.argv.slice(2);
const docker = new Docker({ socketPath: sock });

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// tarOf makes a one-file tar (ustar), as a wrapper builds it to upload.
function tarOf(name, body) {
  const h = Buffer.alloc(512);
  h.write(name, 0);
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(body.length.toString(8).padStart(11, '0') + '\0', 124);
  h.write(Math.floor(Date.now() / 1000).toString(8).padStart(11, '0') + '\0', 136);
  h.write('        ', 148);
  h.write('0', 156);
  h.write('ustar\0' + '00', 257);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  const pad = Buffer.alloc((512 - (body.length % 512)) % 512);
  return Buffer.concat([h, body, pad, Buffer.alloc(1024)]);
}

// fileOfTar reads the first file of a tar.
function fileOfTar(buf) {
  const name = buf.subarray(0, 100).toString().replace(/\0.*$/s, '');
  const size = parseInt(buf.subarray(124, 136).toString().replace(/\0.*$/s, '').trim(), 8);
  return { name, data: buf.subarray(512, 512 + size).toString() };
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
}

async function execRun(ctr, cmd) {
  const ex = await ctr.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await ex.start({ hijack: true, stdin: false });
  const out = new PassThrough(), err = new PassThrough();
  docker.modem.demuxStream(stream, out, err);
  await new Promise((res) => stream.on('end', res));
  out.end(); err.end();
  const [o, e] = await Promise.all([collect(out), collect(err)]);
  const info = await ex.inspect();
  return { stdout: o.toString(), stderr: e.toString(), code: info.ExitCode };
}

async function main() {
  check((await docker.ping()).toString() === 'OK', 'ping');
  const ctr = await docker.createContainer({
    name: 'nodeflow', Image: image, Cmd: ['sleep', '300'], Labels: { 'boxd.test': 'dockerode' },
    HostConfig: { Memory: 64 * 1024 * 1024, NanoCpus: 5e8, PidsLimit: 64, NetworkMode: 'none' },
  });
  try {
    await ctr.start();
    const r = await execRun(ctr, ['sh', '-c', 'echo O; echo E >&2; exit 3']);
    check(r.stdout === 'O\n' && r.stderr === 'E\n' && r.code === 3, `exec: ${JSON.stringify(r)}`);

    await ctr.putArchive(tarOf('hello.txt', Buffer.from('from dockerode\n')), { path: '/tmp' });
    const f = fileOfTar(await collect(await ctr.getArchive({ path: '/tmp/hello.txt' })));
    check(f.name === 'hello.txt' && f.data === 'from dockerode\n', `archive: ${JSON.stringify(f)}`);

    const st = await ctr.stats({ stream: false });
    check(st.memory_stats.limit === 64 * 1024 * 1024 && st.pids_stats.current > 0, `stats: ${JSON.stringify(st.memory_stats)}`);
    await ctr.pause();
    check((await ctr.inspect()).State.Paused === true, 'paused');
    await ctr.unpause();
    const list = await docker.listContainers({ filters: { label: ['boxd.test=dockerode'] } });
    check(list.length === 1 && list[0].Id === ctr.id, `list: ${JSON.stringify(list)}`);
    const info = await ctr.inspect();
    check(info.HostConfig.Memory === 64 * 1024 * 1024 && info.HostConfig.PidsLimit === 64 && info.Name === '/nodeflow', 'inspect');
    await ctr.stop({ t: 1 });
    await ctr.remove();
  } catch (e) {
    await ctr.remove({ force: true }).catch(() => {});
    throw e;
  }

  // A command that ends on its own: wait, then its logs, demultiplexed.
  const once = await docker.createContainer({ Image: image, Cmd: ['sh', '-c', 'echo out; echo err >&2; exit 4'] });
  await once.start();
  const w = await once.wait();
  check(w.StatusCode === 4, `wait: ${JSON.stringify(w)}`);
  const logs = await once.logs({ stdout: true, stderr: true });
  const out = new PassThrough(), err = new PassThrough();
  const src = new PassThrough();
  docker.modem.demuxStream(src, out, err);
  src.end(logs);
  await new Promise((res) => src.on('end', res));
  out.end(); err.end();
  const [o, e] = await Promise.all([collect(out), collect(err)]);
  check(o.toString() === 'out\n' && e.toString() === 'err\n', `logs: ${o} ${e}`);
  await once.remove();

  // A refused field is a 400 naming it.
  try {
    await docker.createContainer({ Image: image, Cmd: ['true'], HostConfig: { Privileged: true } });
    throw new Error('a privileged create worked');
  } catch (e) {
    check(e.statusCode === 400 && /HostConfig\.Privileged/.test(e.message), `privileged: ${e.statusCode} ${e.message}`);
  }
  console.log(JSON.stringify({ ok: true }));
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
