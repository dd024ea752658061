// Drives the embedded cluster with @kubernetes/client-node: typed core and batch calls,
// custom objects, a watch, and error bodies. Prints one JSON document with what it saw.
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const batch = kc.makeApiClient(k8s.BatchV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const out = {};
const ns = 'node-client';

const watched = [];
const watch = new k8s.Watch(kc);
const req = await watch.watch(`/api/v1/namespaces/${ns}/configmaps`, {}, (type, obj) => {
  watched.push(`${type} ${obj.metadata.name}`);
}, () => {});

await core.createNamespace({ body: { metadata: { name: ns } } });
const cm = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'settings', labels: { app: 'demo' } }, data: { k: 'v' } } });
out.configMapUid = Boolean(cm.metadata.uid);
const got = await core.readNamespacedConfigMap({ name: 'settings', namespace: ns });
out.configMapData = got.data;
const patched = await core.patchNamespacedConfigMap(
  { name: 'settings', namespace: ns, body: [{ op: 'replace', path: '/data/k', value: 'w' }] },
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
);
out.patchedData = patched.data;
const listed = await core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'app=demo' });
out.listedNames = listed.items.map((i) => i.metadata.name);
await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'creds' }, stringData: { token: 's3cret' } } });
const secret = await core.readNamespacedSecret({ name: 'creds', namespace: ns });
out.secretData = secret.data;
try {
  await core.readNamespacedConfigMap({ name: 'missing', namespace: ns });
  out.missing = 'found';
} catch (e) {
  out.missing = { code: e.code, reason: JSON.parse(e.body).reason };
}
const job = await batch.createNamespacedJob({ namespace: ns, body: { metadata: { name: 'once' }, spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox:1.36', command: ['true'] }] } } } } });
out.jobUid = Boolean(job.metadata.uid);
const sandbox = await custom.createNamespacedCustomObject({
  group: 'agents.x-k8s.io', version: 'v1beta1', namespace: ns, plural: 'sandboxes',
  body: { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', metadata: { name: 'from-node' }, spec: { podTemplate: { spec: { containers: [{ name: 'agent', image: 'busybox:1.36' }] } } } },
});
out.sandboxGeneration = sandbox.metadata.generation;
const deadline = Date.now() + 30000;
for (;;) {
  const s = await custom.getNamespacedCustomObject({ group: 'agents.x-k8s.io', version: 'v1beta1', namespace: ns, plural: 'sandboxes', name: 'from-node' });
  const ready = (s.status?.conditions ?? []).find((c) => c.type === 'Ready');
  if (ready?.status === 'True') { out.sandboxReady = true; break; }
  if (Date.now() > deadline) { out.sandboxReady = false; break; }
  await new Promise((r) => setTimeout(r, 100));
}
await core.deleteNamespacedConfigMap({ name: 'settings', namespace: ns });
await new Promise((r) => setTimeout(r, 300));
req.abort();
out.watched = watched;
console.log(JSON.stringify(out));
