{{- /*
Generated from values.yaml and values.schema.json by `npm run gen` (scripts/chart-defaults.ts).
Do not edit by hand. This chart's default values, which hookline.fillDefaults (_helpers.tpl)
puts where .Values lacks them, and the keys it leaves absent (keepAbsent): a key whose schema
allows null, and a free-form map, where absence is the user's choice (Helm deletes a key set
to null), unless their whole block is missing.
*/ -}}
{{- define "hookline.defaults" -}}
{
  "values": {
    "replicaCount": 2,
    "image": {
      "repository": "ghcr.io/hookline/hookline",
      "tag": "",
      "digest": "",
      "pullPolicy": "IfNotPresent"
    },
    "imagePullSecrets": [],
    "nameOverride": "",
    "fullnameOverride": "",
    "watchNamespaces": [],
    "serviceAccount": {
      "create": true,
      "name": "",
      "annotations": {}
    },
    "rbac": {
      "create": true,
      "aggregateToDefaultRoles": true
    },
    "leaderElection": {
      "enabled": true,
      "leaseName": "",
      "leaseDurationMs": 15000,
      "renewDeadlineMs": 10000,
      "retryPeriodMs": 2000
    },
    "terminationGracePeriodSeconds": 30,
    "drain": {
      "timeoutMs": null,
      "marginSeconds": 5,
      "action": "requeue"
    },
    "delivery": {
      "timeoutMs": 10000,
      "maxInFlight": 100,
      "allowedNetworks": [],
      "healthProbeIntervalMs": 1800000,
      "secretRefreshMs": 30000,
      "payloadCacheBytes": 33554432
    },
    "proxy": {
      "httpsProxy": "",
      "httpProxy": "",
      "noProxy": [],
      "existingSecret": ""
    },
    "secretReferencePolicy": {
      "enabled": true,
      "validationActions": [
        "Deny"
      ],
      "recheckOnURLChange": false,
      "namespaceSelector": {}
    },
    "circuitBreaker": {
      "failureThreshold": 5,
      "successThreshold": 1,
      "timeoutMs": 60000
    },
    "storage": {
      "maxFinishedDeliveries": 20000,
      "maxDeadLetters": 10000
    },
    "resourceQuota": {
      "enabled": false,
      "namespaces": [],
      "maxDeliveries": 50000
    },
    "flowControl": {
      "enabled": true,
      "matchingPrecedence": 8000,
      "nominalConcurrencyShares": 20,
      "lendablePercent": 50,
      "borrowingLimitPercent": 0,
      "queues": 64,
      "handSize": 6,
      "queueLengthLimit": 50,
      "producers": {
        "enabled": true,
        "matchingPrecedence": 8100,
        "nominalConcurrencyShares": 1,
        "lendablePercent": 0,
        "borrowingLimitPercent": 0,
        "queues": 64,
        "handSize": 4,
        "queueLengthLimit": 50
      }
    },
    "publish": {
      "enabled": false,
      "port": 8090,
      "audiences": [
        "hookline"
      ],
      "tls": {
        "secretName": ""
      },
      "authFailures": {
        "burst": 10,
        "perMinute": 10
      }
    },
    "tracing": {
      "otlpEndpoint": "",
      "serviceName": "hookline",
      "headersSecret": "",
      "sampler": "parentbased_always_on",
      "samplerArg": "",
      "resourceAttributes": {}
    },
    "stream": {
      "natsUrl": "",
      "natsUrlSecret": {
        "name": "",
        "key": "url"
      },
      "natsCredentialsSecret": {
        "name": "",
        "userKey": "user",
        "passwordKey": "password"
      },
      "natsTls": {
        "secretName": "",
        "clientCertificate": false
      },
      "allowInsecure": false,
      "installation": "",
      "replicas": 1,
      "maxHeldBytes": 33554432,
      "maxAgeMs": 604800000,
      "namespaceQuota": {
        "messages": 1000000,
        "bytes": 268435456
      }
    },
    "logLevel": "info",
    "metrics": {
      "port": 8080,
      "providers": [
        "stripe",
        "github",
        "slack",
        "sendgrid",
        "generic"
      ],
      "auth": {
        "enabled": true,
        "readers": []
      },
      "tls": {
        "secretName": ""
      },
      "service": {
        "type": "ClusterIP",
        "port": 8080,
        "annotations": {},
        "labels": {}
      }
    },
    "health": {
      "port": 8081
    },
    "extraEnv": [],
    "resources": {
      "requests": {
        "cpu": "100m",
        "memory": "128Mi"
      },
      "limits": {
        "memory": "512Mi"
      }
    },
    "podSecurityContext": {
      "runAsNonRoot": true,
      "runAsUser": 65532,
      "runAsGroup": 65532,
      "fsGroup": 65532,
      "seccompProfile": {
        "type": "RuntimeDefault"
      }
    },
    "securityContext": {
      "allowPrivilegeEscalation": false,
      "readOnlyRootFilesystem": true,
      "runAsNonRoot": true,
      "capabilities": {
        "drop": [
          "ALL"
        ]
      },
      "seccompProfile": {
        "type": "RuntimeDefault"
      }
    },
    "livenessProbe": {
      "httpGet": {
        "path": "/healthz",
        "port": "health"
      },
      "periodSeconds": 10,
      "timeoutSeconds": 2,
      "failureThreshold": 3
    },
    "readinessProbe": {
      "httpGet": {
        "path": "/readyz",
        "port": "health"
      },
      "periodSeconds": 5,
      "timeoutSeconds": 2,
      "failureThreshold": 2
    },
    "startupProbe": {
      "httpGet": {
        "path": "/healthz",
        "port": "health"
      },
      "periodSeconds": 2,
      "failureThreshold": 30
    },
    "podAnnotations": {},
    "podLabels": {},
    "priorityClassName": "",
    "nodeSelector": {},
    "tolerations": [],
    "affinity": {},
    "topologySpreadConstraints": [],
    "podDisruptionBudget": {
      "enabled": true,
      "maxUnavailable": 1
    },
    "serviceMonitor": {
      "enabled": false,
      "namespace": "",
      "labels": {},
      "interval": "30s",
      "scrapeTimeout": "10s",
      "tlsConfig": {}
    },
    "prometheusRule": {
      "enabled": false,
      "namespace": "",
      "labels": {},
      "runbookBaseUrl": "https://github.com/hookline/hookline/blob/main/docs/operations.md",
      "jobSelector": "",
      "alerts": {
        "breakerOpen": {
          "enabled": true,
          "for": "5m",
          "severity": "warning"
        },
        "backlogAge": {
          "enabled": true,
          "thresholdSeconds": 900,
          "for": "5m",
          "severity": "warning"
        },
        "operatorStalled": {
          "enabled": true,
          "window": "10m",
          "for": "5m",
          "severity": "critical"
        },
        "deadLettersGrowing": {
          "enabled": true,
          "window": "30m",
          "threshold": 0,
          "for": "10m",
          "severity": "warning"
        },
        "lowSuccessRatio": {
          "enabled": true,
          "threshold": 0.9,
          "window": "10m",
          "for": "10m",
          "severity": "warning"
        },
        "noLeader": {
          "enabled": true,
          "for": "5m",
          "severity": "critical"
        },
        "drainTimeout": {
          "enabled": true,
          "window": "1h",
          "severity": "warning"
        },
        "storageBudget": {
          "enabled": true,
          "threshold": 0.8,
          "for": "15m",
          "severity": "warning"
        },
        "streamQuota": {
          "enabled": true,
          "threshold": 0.8,
          "for": "10m",
          "severity": "warning"
        },
        "streamAge": {
          "enabled": true,
          "threshold": 0.5,
          "for": "10m",
          "severity": "warning"
        },
        "deadLettersEvicted": {
          "enabled": true,
          "window": "30m",
          "severity": "warning"
        },
        "leaseAnswersLate": {
          "enabled": true,
          "window": "1h",
          "severity": "warning"
        }
      }
    },
    "grafanaDashboard": {
      "enabled": true,
      "namespace": "",
      "labels": {
        "grafana_dashboard": "1"
      },
      "annotations": {},
      "folder": "Hookline"
    },
    "tests": {
      "ping": {
        "subscription": "",
        "namespace": "",
        "timeout": "60s",
        "resources": {
          "requests": {
            "cpu": "10m",
            "memory": "64Mi"
          },
          "limits": {
            "memory": "256Mi"
          }
        }
      }
    },
    "networkPolicy": {
      "enabled": false,
      "ingress": {
        "metricsFrom": [],
        "publishFrom": []
      },
      "egress": {
        "dns": {
          "enabled": true,
          "ports": [
            53
          ]
        },
        "apiServer": {
          "cidrs": [],
          "ports": [
            443,
            6443
          ]
        },
        "webhooks": {
          "cidrs": [
            "0.0.0.0/0",
            "::/0"
          ],
          "except": [],
          "ports": []
        },
        "nats": {
          "to": [],
          "ports": [
            4222
          ]
        }
      },
      "extraIngress": [],
      "extraEgress": []
    }
  },
  "keepAbsent": [
    "serviceAccount.annotations",
    "drain.timeoutMs",
    "secretReferencePolicy.namespaceSelector",
    "flowControl.borrowingLimitPercent",
    "flowControl.producers.borrowingLimitPercent",
    "tracing.resourceAttributes",
    "metrics.service.annotations",
    "metrics.service.labels",
    "resources.requests",
    "resources.limits",
    "podSecurityContext",
    "securityContext",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "podAnnotations",
    "podLabels",
    "nodeSelector",
    "affinity",
    "serviceMonitor.labels",
    "serviceMonitor.tlsConfig",
    "prometheusRule.labels",
    "grafanaDashboard.labels",
    "grafanaDashboard.annotations",
    "tests.ping.resources"
  ]
}
{{- end }}
