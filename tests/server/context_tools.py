"""
title: Context probe
description: A tool and a filter reporting what the host passed them (tests).
"""

import json
from typing import Any


class Tools:
    async def probe(
        self,
        __metadata__: Any = None,
        __model__: Any = None,
        __request__: Any = None,
        __tools__: Any = None,
        __user__: Any = None,
        __files__: Any = None,
    ) -> str:
        """Report the reserved parameters."""
        meta = __metadata__ or {}
        return json.dumps(
            {
                "chat_id": meta.get("chat_id"),
                "message_id": meta.get("message_id"),
                "user_id": meta.get("user_id"),
                "interface": meta.get("interface"),
                "model": (__model__ or {}).get("id"),
                "meta_model": (meta.get("model") or {}).get("id"),
                "tool_ids": meta.get("tool_ids"),
                "headers": dict(__request__.headers) if __request__ is not None else None,
                "x_probe": __request__.headers.get("X-Probe") if __request__ is not None else None,
                "request_user": (__request__.state.user or {}).get("id") if __request__ else None,
                "path": __request__.path if __request__ is not None else None,
                "tools": sorted(__tools__ or {}),
                "user": (__user__ or {}).get("id"),
                "files": [f.get("name") for f in __files__ or []],
                "meta_files": [f.get("name") for f in meta.get("files") or []],
            }
        )


class Filter:
    def inlet(
        self,
        body: dict[str, Any],
        __metadata__: Any = None,
        __model__: Any = None,
        __request__: Any = None,
        __task__: Any = None,
        __task_body__: Any = None,
    ) -> dict[str, Any]:
        meta = __metadata__ or {}
        seen = json.dumps(
            {
                "call": meta.get("model_call"),
                "model": (__model__ or {}).get("id"),
                "x_probe": __request__.headers.get("x-probe") if __request__ is not None else None,
                "task": __task__,
                "task_body": __task_body__,
                "messages": len(body["messages"]),
            }
        )
        note = {"role": "system", "content": f"inlet {seen}"}
        return {**body, "messages": [note, *body["messages"]]}
