package manifests

// ClusterProfileCRD is a ClusterProfile CRD for tests: the fields of the
// published schema (sigs.k8s.io/cluster-inventory-api, v1alpha1) that the
// fleet reads, the rest kept as they come. The integration suite and the
// soak install it on the embedded API server.
const ClusterProfileCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterprofiles.multicluster.x-k8s.io}
spec:
  group: multicluster.x-k8s.io
  names: {kind: ClusterProfile, listKind: ClusterProfileList, plural: clusterprofiles, singular: clusterprofile}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              accessProviders: &providers
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    cluster:
                      type: object
                      x-kubernetes-preserve-unknown-fields: true
              credentialProviders: *providers
            x-kubernetes-preserve-unknown-fields: true
`
