# bash completion for podscopectl(1)

_podscopectl_ids() {
    podscopectl list --quiet 2>/dev/null | cut -c1-12
}

_podscopectl() {
    local cur prev words cword
    _init_completion 2>/dev/null || {
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    }
    local commands="list status create start stop rm wait update info pull images inspecti rmi imagefsinfo help"
    local c=1
    [[ ${words[1]} == --no-ask-password ]] && c=2
    if ((cword == c)); then
        COMPREPLY=($(compgen -W "$commands --no-ask-password" -- "$cur"))
        return
    fi
    case ${words[c]} in
        list)
            case $prev in
                --state) COMPREPLY=($(compgen -W "created ready notready" -- "$cur")); return;;
                --label) return;;
            esac
            COMPREPLY=($(compgen -W "--state --label --quiet" -- "$cur"))
            ;;
        status|wait)
            ((cword == c + 1)) && COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            ;;
        update)
            if ((cword == c + 1)); then
                COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            elif [[ $prev != --* ]]; then
                COMPREPLY=($(compgen -W "--memory --cpu-quota --cpu-period --cpu-shares --pids-limit" -- "$cur"))
            fi
            ;;
        start|stop|rm|remove)
            COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            ;;
        create)
            case $prev in
                --pid-namespace) COMPREPLY=($(compgen -W "pod container node" -- "$cur")); return;;
                --log-directory) COMPREPLY=($(compgen -d -- "$cur")); return;;
                --namespace|--uid|--attempt|--hostname|--label|--annotation|--cgroup-parent|\
                --runtime-handler|--memory|--cpu-quota|--cpu-period|--cpu-shares|--pids-limit|\
                --port|--dns-server|--dns-search|--dns-option|--sysctl) return;;
            esac
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--namespace --uid --attempt --hostname
                --host-network --pid-namespace --label --annotation --cgroup-parent
                --log-directory --runtime-handler --memory --cpu-quota --cpu-period
                --cpu-shares --pids-limit --port --dns-server --dns-search --dns-option
                --sysctl --start" -- "$cur"))
            ;;
    esac
}
complete -F _podscopectl podscopectl
