// deploy/kubernetes, checked without a cluster:
//
// 1. every object in every YAML file is validated against the Kubernetes
//    OpenAPI schemas (kubernetes-models: types, required fields, enums) and,
//    as `kubectl apply --validate=strict` would, for unknown fields (a typo
//    such as `livenessProbes` the schemas let through), read from the
//    models' type declarations;
// 2. the kustomizations: the files they list exist, every manifest is
//    listed (or named *.example.yaml), every patch is used; each component's
//    JSON patches are applied to the base and the results validated too;
// 3. what no schema sees, for the base and each component: selectors and
//    labels agree (StatefulSet, headless Service, HPA, PDB, gateway), the
//    gateway discovers the replicas with --replicas-from dns: naming the
//    headless Service (which lists Ready pods only) on the port it exposes
//    and nexus serve listens on, with no fixed --replica list left,
//    terminationGracePeriodSeconds covers the preStop sleep plus
//    --drain-timeout, probes use declared ports, every flag is an option of
//    src/cli/cmd_{serve,gateway}.cpp, the Secrets' files are where the flags
//    read them;
// 4. negative self-checks: broken copies must fail, so nothing passes
//    vacuously.
//
// Usage: node kubernetes_manifests.test.mjs [DEPLOY_DIR]   (default ../../deploy/kubernetes)
// Exit codes: 0 pass, 1 fail, 77 skip (packages missing outside CI).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SKIP = 77;
const ci = process.env.CI === 'true';
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const deployDir = path.resolve(process.argv[2] ?? path.join(root, 'deploy/kubernetes'));
const rel = (f) => path.relative(root, f);

let YAML;
try {
  YAML = await import('yaml');
  await import('kubernetes-models/apps/v1');
} catch (e) {
  console.error(`${ci ? 'FAIL' : 'SKIP'}: yaml / kubernetes-models not installed (run scripts/install-deps.sh): ${e.message}`);
  process.exit(ci ? 1 : SKIP);
}
const require = createRequire(import.meta.url);

const failures = [];
const fail = (msg) => failures.push(msg);
const clone = (v) => structuredClone(v);
const describe = (o) => `${o.kind}/${o.metadata?.name ?? '?'}`;

// ---- 1. schemas ----------------------------------------------------------

// The kubernetes-models class of an apiVersion + kind ("apps/v1" ->
// kubernetes-models/apps/v1, "v1" -> kubernetes-models/v1), or null.
async function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return null;
  try {
    const mod = await import(`kubernetes-models/${apiVersion}`);
    const cls = mod[kind];
    return typeof cls === 'function' && cls.apiVersion === apiVersion && cls.kind === kind ? cls : null;
  } catch {
    return null;
  }
}

// The fields of a model's interface, from its generated .d.ts: a Map from
// field name to a thunk giving the field's own shape (null: a scalar, a map
// or an alias such as IntOrString, not checked further). null for a file
// without fields (free-form, as FieldsV1).
const shapes = new Map();
function shapeOf(jsFile) {
  if (shapes.has(jsFile)) return shapes.get(jsFile);
  const text = readFileSync(jsFile.replace(/\.js$/, '.d.ts'), 'utf8');
  const body = /^export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)^\}/m.exec(text);
  let fields = null;
  if (body) {
    const imports = new Map([...text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)].map((m) => [m[1], m[2]]));
    const req = createRequire(jsFile);
    fields = new Map();
    for (const [, name, type] of body[1].matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
      const ref = /^(?:Array<)?(IIoK8s\w+)>?;$/.exec(type);
      fields.set(name, ref && imports.has(ref[1]) ? () => shapeOf(req.resolve(imports.get(ref[1]))) : null);
    }
    if (fields.size === 0) fields = null;
  }
  shapes.set(jsFile, fields);
  return fields;
}

function unknownFields(value, shape, at, out) {
  if (!shape || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) return value.forEach((v, i) => unknownFields(v, shape, `${at}[${i}]`, out));
  for (const [k, v] of Object.entries(value)) {
    if (!shape.has(k)) out.push(`${at}${at ? '.' : ''}${k}: unknown field`);
    else if (shape.get(k)) unknownFields(v, shape.get(k)(), `${at}${at ? '.' : ''}${k}`, out);
  }
}

// Throws with the schema's or the strict check's message.
async function validateObject(obj) {
  const cls = await modelClass(obj.apiVersion, obj.kind);
  if (!cls) throw new Error(`unknown apiVersion/kind ${obj.apiVersion} ${obj.kind} (not in kubernetes-models)`);
  new cls(clone(obj)).validate();
  const extra = [];
  unknownFields(obj, shapeOf(require.resolve(`kubernetes-models/${obj.apiVersion}/${obj.kind}`)), '', extra);
  if (extra.length) throw new Error(extra.join('; '));
}

// ---- 2. files and kustomizations -----------------------------------------

function yamlFiles(dir) {
  return readdirSync(dir).sort().flatMap((n) => {
    const f = path.join(dir, n);
    if (statSync(f).isDirectory()) return yamlFiles(f);
    return /\.ya?ml$/.test(n) ? [f] : [];
  });
}

const objects = [];  // {file, obj}
const kustomizations = [];  // {file, obj}
const patches = new Map();  // file -> JSON patch ops
let files = 0;
for (const file of yamlFiles(deployDir)) {
  files++;
  // YAML 1.1, as kubectl reads it (sigs.k8s.io/yaml): `on`, `yes` are booleans there.
  for (const doc of YAML.parseAllDocuments(readFileSync(file, 'utf8'), { version: '1.1' })) {
    if (doc.errors.length) {
      fail(`${rel(file)}: YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;
    if (Array.isArray(obj)) patches.set(file, obj);
    else if (String(obj.apiVersion).startsWith('kustomize.config.k8s.io/')) kustomizations.push({ file, obj });
    else objects.push({ file, obj });
  }
}

let validated = 0;
for (const { file, obj } of objects) {
  try {
    await validateObject(obj);
    validated++;
  } catch (e) {
    fail(`${rel(file)}: ${describe(obj)}: ${e.message}`);
  }
}

const usedPatches = new Set();
let base = null;  // the objects of the top-level kustomization
const components = [];  // {name, patches: [{target, ops, file}]}
for (const { file, obj } of kustomizations) {
  const dir = path.dirname(file);
  const where = `${rel(file)}: ${obj.kind}`;
  for (const entry of [...(obj.resources ?? []), ...(obj.components ?? [])])
    if (!existsSync(path.join(dir, entry))) fail(`${where}: lists ${entry}, which does not exist`);
  const ps = [];
  for (const p of obj.patches ?? []) {
    const pf = path.join(dir, p.path ?? '');
    if (!p.path || !patches.has(pf)) {
      fail(`${where}: patch ${p.path}: missing, or not a JSON patch (a YAML list of ops)`);
      continue;
    }
    if (!p.target?.kind || !p.target?.name) fail(`${where}: patch ${p.path}: needs target.kind and target.name`);
    usedPatches.add(pf);
    ps.push({ target: p.target ?? {}, ops: patches.get(pf), file: pf });
  }
  if (obj.kind === 'Component') components.push({ name: path.relative(deployDir, dir), patches: ps });
  else if (obj.kind === 'Kustomization' && dir === deployDir) {
    // Every manifest beside it is listed, unless it is an example.
    const listed = new Set((obj.resources ?? []).map((r) => path.join(dir, r)));
    for (const f of yamlFiles(dir))
      if (path.dirname(f) === dir && f !== file && !f.endsWith('.example.yaml') && !listed.has(f))
        fail(`${where}: ${rel(f)} is not in resources (list it, or name it *.example.yaml)`);
    base = objects.filter((o) => listed.has(o.file)).map((o) => {
      const c = clone(o.obj);
      if (obj.namespace && c.kind !== 'Namespace') c.metadata = { ...c.metadata, namespace: obj.namespace };
      return c;
    });
  } else fail(`${where}: unexpected (a Kustomization only at the top, Components below)`);
}
for (const f of patches.keys()) if (!usedPatches.has(f)) fail(`${rel(f)}: a patch no kustomization uses`);
if (!base) fail(`${rel(deployDir)}: no kustomization.yaml`);

// RFC 6902 add / replace, which is all the components use.
function applyPatch(doc, ops, where) {
  for (const op of ops) {
    const parts = String(op.path).split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop();
    let parent = doc;
    for (const p of parts) {
      parent = parent?.[Array.isArray(parent) ? Number(p) : p];
      if (parent === undefined) throw new Error(`${where}: ${op.op} ${op.path}: no such path`);
    }
    const value = clone(op.value);
    if (!['add', 'replace'].includes(op.op)) throw new Error(`${where}: op ${op.op} is not supported here`);
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (!(i >= 0 && i <= parent.length) || (op.op === 'replace' && i === parent.length))
        throw new Error(`${where}: ${op.op} ${op.path}: index out of range`);
      parent.splice(i, op.op === 'replace' ? 1 : 0, value);
    } else if (parent && typeof parent === 'object') {
      if (op.op === 'replace' && !(last in parent)) throw new Error(`${where}: replace ${op.path}: no such field`);
      parent[last] = value;
    } else throw new Error(`${where}: ${op.op} ${op.path}: parent is not an object or list`);
  }
}

function matches(obj, t) {
  const apiVersion = t.version ? (t.group ? `${t.group}/${t.version}` : t.version) : obj.apiVersion;
  return obj.kind === t.kind && obj.metadata?.name === t.name && obj.apiVersion === apiVersion;
}

function withComponents(list) {
  const objs = base.map(clone);
  for (const c of list)
    for (const p of c.patches) {
      const hit = objs.filter((o) => matches(o, p.target));
      if (hit.length === 0) throw new Error(`${rel(p.file)}: its target ${p.target.kind}/${p.target.name} is not in the base`);
      for (const o of hit) applyPatch(o, p.ops, rel(p.file));
    }
  return objs;
}

// ---- 3. cross-references ---------------------------------------------------

// The options a `nexus` command registers, from its source: name -> canonical name.
function optionsOf(source) {
  const names = new Map();
  const text = readFileSync(path.join(root, source), 'utf8');
  for (const [, spec] of text.matchAll(/add_(?:option|flag)\(\s*"([^"]+)"/g)) {
    const all = spec.split(',');
    for (const n of all) names.set(n, all[all.length - 1]);
  }
  return names;
}
const commands = { serve: optionsOf('src/cli/cmd_serve.cpp'), gateway: optionsOf('src/cli/cmd_gateway.cpp') };
const metricsDoc = readFileSync(path.join(root, 'docs/metrics.md'), 'utf8');

const podSpec = (w) => w.spec?.template?.spec ?? {};
const podLabels = (w) => w.spec?.template?.metadata?.labels ?? {};
const subset = (sel, labels) => Object.keys(sel ?? {}).length > 0 &&
  Object.entries(sel).every(([k, v]) => labels?.[k] === v);
const argvOf = (c) => [...(c.command ?? ['nexus']), ...(c.args ?? [])];  // deploy/Dockerfile: ENTRYPOINT nexus
const runs = (c, sub) => path.basename(argvOf(c)[0]) === 'nexus' && argvOf(c)[1] === sub;

// `$(VAR)` as the kubelet expands it from the container's env.
const expand = (s, c) => String(s).replace(/\$\((\w+)\)/g, (m, v) => c.env?.find((e) => e.name === v)?.value ?? m);

function flagsOf(c, sub, check) {
  const argv = argvOf(c).slice(2);
  const known = commands[sub];
  const flags = new Map();
  for (let i = 0; i < argv.length; i++) {
    const a = String(argv[i]);
    if (!a.startsWith('-')) {
      check(false, `nexus ${sub}: stray argument '${a}'`);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(0, eq) : a;
    const value = expand(eq > 0 ? a.slice(eq + 1) : argv[++i], c);
    if (!check(known.has(name), `nexus ${sub}: ${name} is not an option of src/cli/cmd_${sub}.cpp`)) continue;
    const canonical = known.get(name);
    flags.set(canonical, [...(flags.get(canonical) ?? []), value]);
  }
  return flags;
}

// A probe's or Service's port (a name or a number) -> the container's port number.
function portOf(c, port) {
  const p = (c.ports ?? []).find((x) => x.name === port || x.containerPort === port);
  return p?.containerPort;
}

function checkLifecycle(w, c, flags, check, what) {
  const drain = Number(flags.get('--drain-timeout')?.[0]);
  check(Number.isFinite(drain), `${what}: pass --drain-timeout explicitly (the grace period is checked against it)`);
  const pre = c.lifecycle?.preStop;
  const cmd = pre?.exec?.command ?? [];
  const sleep = pre?.sleep ? Number(pre.sleep.seconds) : path.basename(String(cmd[0] ?? '')) === 'sleep' ? Number(cmd[1]) : NaN;
  check(Number.isFinite(sleep), `${what}: a preStop sleep (exec sleep N, or sleep.seconds) lets the endpoints update before SIGTERM`);
  const grace = podSpec(w).terminationGracePeriodSeconds;
  check(grace >= sleep + drain, `${what}: terminationGracePeriodSeconds ${grace} < preStop sleep ${sleep} + --drain-timeout ${drain}`);
  for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
    const probe = c[kind];
    if (!probe) continue;
    const port = probe.httpGet?.port ?? probe.tcpSocket?.port ?? probe.grpc?.port;
    check(portOf(c, port) !== undefined, `${what}: ${kind} port ${port} is not a container port`);
  }
  check(c.readinessProbe?.httpGet?.path === '/health', `${what}: the readiness probe is GET /health (503 while draining)`);
  check(c.livenessProbe && c.livenessProbe.httpGet?.path !== '/health',
        `${what}: a liveness probe, not on /health (its 503 while draining would restart a draining pod)`);
}

// Every file flag reads a key of a Secret mounted at its directory.
function checkFileFlags(c, w, flags, secrets, check, what) {
  for (const flag of ['--api-keys', '--tls-cert', '--tls-key']) {
    for (const file of flags.get(flag) ?? []) {
      const m = (c.volumeMounts ?? []).find((vm) => path.dirname(file) === path.normalize(vm.mountPath));
      const vol = m && (podSpec(w).volumes ?? []).find((v) => v.name === m.name);
      const secret = vol?.secret && secrets.find((s) => s.metadata.name === vol.secret.secretName);
      const keys = Object.keys({ ...secret?.data, ...secret?.stringData });
      check(secret && keys.includes(path.basename(file)),
            `${what}: ${flag} ${file} is not a key of a Secret (secrets.example.yaml) mounted at ${path.dirname(file)}`);
    }
  }
}

// Returns [errors, number of checks]. `secrets`: the example Secrets.
function crossCheck(objs, secrets) {
  const errors = [];
  let n = 0;
  const check = (ok, msg) => {
    n++;
    if (!ok) errors.push(msg);
    return ok;
  };
  const one = (what, pred) => {
    const found = objs.filter(pred);
    check(found.length === 1, `expected one ${what}, found ${found.length}`);
    return found[0];
  };
  const sts = one('StatefulSet', (o) => o.kind === 'StatefulSet');
  const headless = one('headless Service', (o) => o.kind === 'Service' && o.spec?.clusterIP === 'None');
  const hpa = one('HorizontalPodAutoscaler', (o) => o.kind === 'HorizontalPodAutoscaler');
  const pdb = one('PodDisruptionBudget', (o) => o.kind === 'PodDisruptionBudget');
  const gw = one('Deployment running `nexus gateway`',
                 (o) => o.kind === 'Deployment' && podSpec(o).containers?.some((c) => runs(c, 'gateway')));
  const gwSvc = one('gateway Service', (o) => o.kind === 'Service' && o.spec?.clusterIP !== 'None');
  if (!sts || !headless || !hpa || !pdb || !gw || !gwSvc) return [errors, n];
  const stsName = sts.metadata.name, svcName = headless.metadata.name, ns = sts.metadata.namespace;
  const replicaLabels = podLabels(sts), gatewayLabels = podLabels(gw);

  // The replicas.
  check(subset(sts.spec.selector?.matchLabels, replicaLabels), 'StatefulSet: selector does not match its pod labels');
  check(sts.spec.serviceName === svcName, `StatefulSet: serviceName ${sts.spec.serviceName} is not the headless Service ${svcName}`);
  check(sts.spec.podManagementPolicy === 'Parallel', 'StatefulSet: podManagementPolicy Parallel');
  check(sts.spec.replicas === undefined, 'StatefulSet: no spec.replicas (the HPA owns it; apply would reset it)');
  const serve = podSpec(sts).containers?.find((c) => runs(c, 'serve'));
  if (!check(serve, 'StatefulSet: no container runs `nexus serve`')) return [errors, n];
  const sf = flagsOf(serve, 'serve', check);
  check(['0.0.0.0', '::'].includes(sf.get('--host')?.[0]), 'nexus serve: --host 0.0.0.0 (the default 127.0.0.1 is unreachable)');
  const servePort = Number(sf.get('--port')?.[0] ?? 8080);
  check(portOf(serve, servePort) === servePort, `nexus serve: --port ${servePort} is not a container port`);
  checkLifecycle(sts, serve, sf, check, 'nexus serve');
  const mounts = [...(podSpec(sts).initContainers ?? []), ...podSpec(sts).containers].flatMap((c) => c.volumeMounts ?? []);
  const volumes = [...(podSpec(sts).volumes ?? []), ...(sts.spec.volumeClaimTemplates ?? []).map((t) => t.metadata)];
  for (const m of mounts) check(volumes.some((v) => v.name === m.name), `StatefulSet: volumeMount ${m.name} has no volume`);
  const pull = (podSpec(sts).initContainers ?? []).find((c) => runs(c, 'pull'));
  if (pull) {
    const env = (c, v) => c.env?.find((e) => e.name === v)?.value;
    check(expand(argvOf(pull)[2], pull) === sf.get('--model')?.[0],
          `StatefulSet: the init container pulls ${expand(argvOf(pull)[2], pull)}, serve -m is ${sf.get('--model')?.[0]}`);
    check(env(pull, 'NEXUS_HOME') && env(pull, 'NEXUS_HOME') === env(serve, 'NEXUS_HOME'), 'StatefulSet: pull and serve share NEXUS_HOME');
    const mountAt = (c) => c.volumeMounts?.find((m) => m.mountPath === env(c, 'NEXUS_HOME'))?.name;
    check(mountAt(pull) && mountAt(pull) === mountAt(serve), 'StatefulSet: pull and serve mount one volume at NEXUS_HOME');
  }
  check(headless.spec.publishNotReadyAddresses !== true,
        'headless Service: publishNotReadyAddresses must not be true (its DNS answer is the gateway\'s replica list: Ready pods only)');
  check(subset(headless.spec.selector, replicaLabels), 'headless Service: selector does not match the replica pods');
  for (const p of headless.spec.ports ?? [])
    check(portOf(serve, p.targetPort ?? p.port) === servePort, `headless Service: port ${p.name} does not reach --port`);

  // Autoscaling and disruptions.
  const ref = hpa.spec.scaleTargetRef;
  check(ref.apiVersion === 'apps/v1' && ref.kind === 'StatefulSet' && ref.name === stsName,
        `HPA: scaleTargetRef ${ref.apiVersion} ${ref.kind}/${ref.name} is not the StatefulSet ${stsName}`);
  check(hpa.spec.minReplicas >= 2 && hpa.spec.minReplicas <= hpa.spec.maxReplicas, 'HPA: 2 <= minReplicas <= maxReplicas');
  const podMetrics = (hpa.spec.metrics ?? []).filter((m) => m.type === 'Pods').map((m) => m.pods.metric.name);
  check(podMetrics.includes('nexus_waiting_requests'), 'HPA: a Pods metric on nexus_waiting_requests');
  for (const name of podMetrics)
    check(metricsDoc.includes(`| \`${name}\` |`), `HPA: ${name} is not a metric in docs/metrics.md`);
  check(subset(pdb.spec.selector?.matchLabels, replicaLabels), 'PDB: selector does not match the replica pods');
  check(!subset(pdb.spec.selector?.matchLabels, gatewayLabels), 'PDB: selector also matches the gateway pods');
  check(pdb.spec.maxUnavailable !== undefined ||
        (typeof pdb.spec.minAvailable === 'number' && pdb.spec.minAvailable < hpa.spec.minReplicas),
        'PDB: maxUnavailable, or a minAvailable below minReplicas (else no eviction is ever allowed)');

  // The gateway.
  const gc = podSpec(gw).containers.find((c) => runs(c, 'gateway'));
  const gf = flagsOf(gc, 'gateway', check);
  check(subset(gw.spec.selector?.matchLabels, gatewayLabels) && !subset(gw.spec.selector?.matchLabels, replicaLabels),
        'gateway Deployment: selector must match its own pods only');
  const listenPort = Number(String(gf.get('--listen')?.[0] ?? '').split(':').pop());
  check(portOf(gc, listenPort) === listenPort, `nexus gateway: --listen port ${listenPort} is not a container port`);
  checkLifecycle(gw, gc, gf, check, 'nexus gateway');
  // Replicas: discovered through the headless Service (--replicas-from
  // dns:NAME:PORT), not a fixed --replica list. NAME is the Service, short
  // (resolved through the pod's search path, in any namespace) or in full in
  // its namespace; PORT is a port the Service exposes and the one `nexus
  // serve` listens on (the gateway connects to the pod IPs directly).
  check(!gf.has('--replica'),
        `nexus gateway: a fixed --replica list remains (${gf.get('--replica')}); --replicas-from discovers the replicas`);
  const sources = gf.get('--replicas-from') ?? [];
  check(sources.length === 1, `nexus gateway: --replicas-from given ${sources.length} times, want once: dns:${svcName}:${servePort}`);
  const fullName = `${svcName}.${ns}.svc.cluster.local`;
  const svcPorts = (headless.spec.ports ?? []).map((p) => p.port);
  for (const s of sources) {
    const m = /^dns:([^:]+):(\d+)$/.exec(s);  // as parse_dns_source reads it (src/gateway/dns_discovery.cpp)
    if (!check(m, `nexus gateway: --replicas-from ${s} is not dns:NAME:PORT`)) continue;
    const [, name, port] = [m[0], m[1], Number(m[2])];
    check([svcName, fullName, `${fullName}.`].includes(name),
          `nexus gateway: --replicas-from ${s} does not name the headless Service: want ${svcName} or ${fullName}`);
    check(port === servePort, `nexus gateway: --replicas-from ${s}: port ${port} is not nexus serve --port ${servePort}`);
    check(svcPorts.includes(port), `nexus gateway: --replicas-from ${s}: port ${port} is not a port of the headless Service ${svcName} [${svcPorts}]`);
  }
  // The short name needs the cluster DNS and its search path.
  check(podSpec(gw).hostNetwork !== true && [undefined, 'ClusterFirst'].includes(podSpec(gw).dnsPolicy),
        'gateway Deployment: dnsPolicy ClusterFirst, no hostNetwork (--replicas-from resolves through the cluster DNS)');
  const tls = gf.has('--tls-cert');
  for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe'])
    if (gc[kind]?.httpGet)
      check((gc[kind].httpGet.scheme ?? 'HTTP') === (tls ? 'HTTPS' : 'HTTP'), `nexus gateway: ${kind} scheme must be ${tls ? 'HTTPS' : 'HTTP'}`);
  for (const m of gc.volumeMounts ?? [])
    check((podSpec(gw).volumes ?? []).some((v) => v.name === m.name), `gateway Deployment: volumeMount ${m.name} has no volume`);
  checkFileFlags(gc, gw, gf, secrets, check, 'nexus gateway');
  check(subset(gwSvc.spec.selector, gatewayLabels) && !subset(gwSvc.spec.selector, replicaLabels),
        'gateway Service: selector must match the gateway pods only');
  for (const p of gwSvc.spec.ports ?? []) {
    check(portOf(gc, p.targetPort ?? p.port) === listenPort, `gateway Service: port ${p.name} does not reach --listen`);
    check(p.port === (tls ? 443 : 80), `gateway Service: port ${p.port}, want ${tls ? 443 : 80}`);
  }
  return [errors, n];
}

// ---- run -------------------------------------------------------------------

// The base, each component alone, all of them. A variant reports only what
// the base does not (the base's own errors once).
let checks = 0;
const variants = base ? [[], ...components.map((c) => [c]), components] : [];
const secrets = objects.filter((o) => o.obj.kind === 'Secret').map((o) => o.obj);
let baseErrors = new Set();
for (const list of variants) {
  const label = list.length ? `base + ${list.map((c) => c.name).join(' + ')}` : 'base';
  let objs;
  try {
    objs = withComponents(list);
  } catch (e) {
    fail(`${label}: ${e.message}`);
    continue;
  }
  for (const [i, o] of objs.entries()) {
    if (JSON.stringify(o) === JSON.stringify(base[i])) continue;  // validated as a file already
    try {
      await validateObject(o);
    } catch (e) {
      fail(`${label}: ${describe(o)} after the patches: ${e.message}`);
    }
  }
  const [errors, n] = crossCheck(objs, secrets);
  checks += n;
  for (const e of errors) if (!baseErrors.has(e)) fail(`${label}: ${e}`);
  if (!list.length) baseErrors = new Set(errors);
}

// ---- 4. negative self-checks --------------------------------------------
// Broken copies must be caught, or the checks above prove nothing.
let caught = 0;
async function mustThrow(what, obj, pattern) {
  try {
    await validateObject(obj);
    fail(`self-check: ${what} passed validation`);
  } catch (e) {
    if (pattern.test(e.message)) caught++;
    else fail(`self-check: ${what} failed for another reason: ${e.message}`);
  }
}
function mustReport(what, objs, pattern) {
  const [errors] = crossCheck(objs, secrets);
  if (errors.some((e) => pattern.test(e))) caught++;
  else fail(`self-check: ${what} was not reported (got: ${errors.join('; ') || 'no error'})`);
}
const baseOf = (kind) => base?.find((o) => o.kind === kind);
if (baseOf('StatefulSet') && baseOf('Deployment')) {
  const wrongType = clone(baseOf('StatefulSet'));
  wrongType.spec.minReadySeconds = 'soon';
  await mustThrow('a StatefulSet with minReadySeconds "soon"', wrongType, /minReadySeconds must be integer/);
  const typo = clone(baseOf('StatefulSet'));
  typo.spec.template.spec.containers[0].livenessProbes = typo.spec.template.spec.containers[0].livenessProbe;
  await mustThrow('a container with "livenessProbes"', typo, /livenessProbes: unknown field/);
  // The gateway's replica discovery: edit a copy's args or its Services.
  const withGateway = (edit) => {
    const objs = base.map(clone);
    edit(objs.find((o) => o.kind === 'Deployment').spec.template.spec.containers[0].args, objs);
    return objs;
  };
  const source = (to) => withGateway((args) => {
    args[args.findIndex((a) => String(a).startsWith('--replicas-from'))] = `--replicas-from=${to}`;
  });
  const headlessOf = (objs) => objs.find((o) => o.kind === 'Service' && o.spec?.clusterIP === 'None');
  mustReport('--replicas-from naming another Service', source('dns:nexus-replica:8080'), /does not name the headless Service/);
  mustReport('--replicas-from in another namespace', source('dns:nexus-replicas.default.svc.cluster.local:8080'),
             /does not name the headless Service/);
  mustReport('--replicas-from on the gateway\'s port', source('dns:nexus-replicas:8090'), /port 8090 is not nexus serve --port/);
  mustReport('a headless Service on another port', withGateway((args, objs) => { headlessOf(objs).spec.ports[0].port = 8081; }),
             /is not a port of the headless Service/);
  mustReport('no --replicas-from', withGateway((args) => args.splice(args.findIndex((a) => String(a).startsWith('--replicas-from')), 1)),
             /--replicas-from given 0 times/);
  mustReport('a fixed --replica list left over', withGateway((args) => args.push('--replica=http://nexus-replica-0.nexus-replicas:8080')),
             /a fixed --replica list remains/);
  mustReport('a headless Service publishing not-ready pods',
             withGateway((args, objs) => { headlessOf(objs).spec.publishNotReadyAddresses = true; }), /publishNotReadyAddresses/);
  mustReport('a gateway on the node\'s DNS', withGateway((args, objs) => {
    objs.find((o) => o.kind === 'Deployment').spec.template.spec.dnsPolicy = 'Default';
  }), /dnsPolicy ClusterFirst/);
  // ... and the full name in its namespace is as good as the short one.
  const [ownErrors] = crossCheck(base, secrets);
  const [fullErrors] = crossCheck(source(`dns:nexus-replicas.${baseOf('StatefulSet').metadata.namespace}.svc.cluster.local:8080`), secrets);
  const newErrors = fullErrors.filter((e) => !ownErrors.includes(e));
  if (newErrors.length) fail(`self-check: --replicas-from with the full name was refused: ${newErrors.join('; ')}`);
  const hurried = base.map(clone);
  hurried.find((o) => o.kind === 'StatefulSet').spec.template.spec.terminationGracePeriodSeconds = 30;
  mustReport('a grace period shorter than the drain', hurried, /terminationGracePeriodSeconds 30 </);
  const typoFlag = base.map(clone);
  typoFlag.find((o) => o.kind === 'StatefulSet').spec.template.spec.containers[0].args.push('--drain-timout=5');
  mustReport('a misspelt nexus serve flag', typoFlag, /--drain-timout is not an option/);
} else fail('self-check: no StatefulSet and Deployment in the base to break');

if (failures.length) {
  for (const f of failures) console.error(`FAIL: ${f}`);
  process.exit(1);
}
const version = JSON.parse(readFileSync(require.resolve('kubernetes-models/package.json'), 'utf8')).version;
console.log(`kubernetes manifests: ${validated} objects in ${files} files validated (kubernetes-models ${version}, ` +
            `strict fields); ${variants.length} variants (base, ${components.map((c) => `+${c.name}`).join(', ')}, all) ` +
            `cross-checked, ${checks} checks; ${caught} broken copies caught`);
